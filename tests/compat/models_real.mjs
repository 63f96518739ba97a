// models_real.mjs — two models side by side through the official npm OpenAI
// SDK, against a running `zerolayer serve` with several models
// (tests/real/models.sh starts it: stories260K first, SmolLM2 as 'small').
// A streamed chat on 'small' and a completion on 'stories260K' run at once;
// each gives the greedy text its model gives alone (REFS_JSON), models.list()
// names them all, and an unknown model is the SDK's NotFoundError.
// usage: node models_real.mjs BASE_URL REFS_JSON
import fs from 'node:fs';
import OpenAI from 'openai';

const [url, refFile] = process.argv.slice(2);
const refs = JSON.parse(fs.readFileSync(refFile, 'utf8'));
const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'none' });
let fails = 0;
const check = (ok, what) => { console.log((ok ? 'ok   ' : 'FAIL ') + 'npm openai: ' + what); if (!ok) fails++; };

const ids = [];
for await (const m of client.models.list()) ids.push(m.id);
check(JSON.stringify(ids) === JSON.stringify(['stories260K', 'small', 'tiny2']), `models.list(): ${ids}`);
const chat = (async () => {
  const stream = await client.chat.completions.create({
    model: 'small', stream: true, temperature: 0, max_tokens: 12,
    messages: [{ role: 'user', content: 'What is the capital of France?' }],
  });
  let text = '';
  for await (const c of stream) text += c.choices[0]?.delta?.content ?? '';
  return text;
})();
const comp = client.completions.create({ model: 'stories260K', prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
const [a, b] = await Promise.all([chat, comp]);
check(a === refs.small, `streamed chat on 'small' while 'stories260K' completes: ${JSON.stringify(a)}`);
check(b.choices[0].text === refs.tiny && b.model === 'stories260K', `completion on 'stories260K' at the same time: ${JSON.stringify(b.choices[0].text)}`);
try {
  await client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] });
  check(false, 'unknown model accepted');
} catch (e) {
  check(e instanceof OpenAI.NotFoundError && e.code === 'model_not_found', `unknown model: ${e.status} ${e.code}`);
}
process.exit(fails ? 1 : 0);
