// embeddings_real.mjs — /v1/embeddings through the official npm OpenAI SDK,
// against a running `zerolayer serve` (tests/real/embeddings.sh starts it).
// The SDK asks for base64 unless told otherwise and decodes it into
// float32; both that and encoding_format "float" must give exactly the
// vectors of VECTORS_JSON (what embeddings.sh read with plain HTTP), and a
// refused `dimensions` must surface as the SDK's BadRequestError.
// usage: node embeddings_real.mjs BASE_URL VECTORS_JSON
import fs from 'node:fs';
import OpenAI from 'openai';

const [url, vecFile] = process.argv.slice(2);
const { texts, vectors } = JSON.parse(fs.readFileSync(vecFile, 'utf8'));
const client = new OpenAI({ baseURL: url + '/v1', apiKey: 'none' });
let fails = 0;
const check = (ok, what) => { console.log((ok ? 'ok   ' : 'FAIL ') + 'npm openai: ' + what); if (!ok) fails++; };
const same = (a, b) => a.length === b.length && a.every((x, i) => Math.fround(x) === Math.fround(b[i]) && x === b[i]);

const b64 = await client.embeddings.create({ model: 'smollm2', input: texts });
check(b64.data.length === texts.length && b64.data.every((d, i) => same(Array.from(d.embedding), vectors[i])),
  `default (base64, decoded by the SDK): ${b64.data.length} vectors equal the plain-HTTP floats`);
check(b64.usage.prompt_tokens > 0 && b64.usage.total_tokens === b64.usage.prompt_tokens, `usage ${JSON.stringify(b64.usage)}`);
const fl = await client.embeddings.create({ model: 'smollm2', input: texts[2], encoding_format: 'float' });
check(same(fl.data[0].embedding, vectors[2]), 'encoding_format float, one string');
try {
  await client.embeddings.create({ model: 'smollm2', input: 'x', dimensions: 8 });
  check(false, 'dimensions: accepted');
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'dimensions', `dimensions: ${e.status} ${e.message}`);
}
process.exit(fails ? 1 : 0);
