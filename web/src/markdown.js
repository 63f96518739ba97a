// markdown.js — model text to safe DOM: marked renders Markdown, DOMPurify
// removes every script, handler and active element, highlight.js colours the
// code blocks (it escapes, never evaluates), each block gets a copy button.
// The Content-Security-Policy the server sends with the page (no inline
// script or handler runs) is the second wall behind the sanitiser.
import { marked } from 'marked';
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import c from 'highlight.js/lib/languages/c';
import cpp from 'highlight.js/lib/languages/cpp';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import xml from 'highlight.js/lib/languages/xml';

for (const [n, l] of Object.entries({ bash, c, cpp, javascript, json, python, rust, xml })) hljs.registerLanguage(n, l);
hljs.registerAliases(['sh', 'shell'], { languageName: 'bash' });
hljs.registerAliases(['js', 'ts', 'typescript'], { languageName: 'javascript' });
hljs.registerAliases(['html'], { languageName: 'xml' });
hljs.registerAliases(['py'], { languageName: 'python' });

const PURIFY = {
  FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed', 'svg', 'math'],
  FORBID_ATTR: ['style', 'srcset'],
  ALLOW_DATA_ATTR: false,
};
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') { node.setAttribute('target', '_blank'); node.setAttribute('rel', 'noopener noreferrer'); }
});

export function copyButton(getText) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = 'copy';
  b.textContent = 'Copy';
  b.addEventListener('click', async () => {
    try { await navigator.clipboard.writeText(getText()); b.textContent = 'Copied'; } catch { b.textContent = 'Copy failed'; }
    setTimeout(() => { b.textContent = 'Copy'; }, 1200);
  });
  return b;
}

// Render text into el (replacing its content).
export function renderMarkdown(el, text) {
  el.innerHTML = DOMPurify.sanitize(marked.parse(text, { gfm: true, async: false }), PURIFY);
  for (const code of el.querySelectorAll('pre > code')) {
    const lang = (/language-([\w+-]+)/.exec(code.className) || [])[1];
    if (lang && hljs.getLanguage(lang)) {
      code.innerHTML = hljs.highlight(code.textContent, { language: lang, ignoreIllegals: true }).value;
      code.classList.add('hljs');
    }
    const pre = code.parentElement;
    pre.appendChild(copyButton(() => code.textContent));
  }
}
