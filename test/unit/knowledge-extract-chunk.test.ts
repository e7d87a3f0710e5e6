import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { chunkText } from '../../src/knowledge/chunk.js';
import { detectType, htmlToText, normalise } from '../../src/knowledge/extract.js';

describe('chunkText', () => {
  it('keeps short text as one passage', () => {
    assert.deepEqual(chunkText('One short passage.', { size: 100, overlap: 20 }), ['One short passage.']);
  });

  it('splits long text into passages of at most `size`, overlapping, covering every word', () => {
    const words = Array.from({ length: 400 }, (_, i) => `w${i}`);
    const text = words.join(' ');
    const chunks = chunkText(text, { size: 200, overlap: 50 });
    assert.ok(chunks.length > 5);
    for (const c of chunks) assert.ok(c.length <= 200, `${c.length}`);
    for (let i = 1; i < chunks.length; i++) {
      const prevTail = chunks[i - 1].split(' ').slice(-3);
      assert.ok(
        prevTail.some((w) => chunks[i].split(' ').includes(w)),
        `passage ${i} overlaps the previous one`,
      );
    }
    const seen = new Set(chunks.flatMap((c) => c.split(' ')));
    assert.deepEqual(
      words.filter((w) => !seen.has(w)),
      [],
      'no word is lost or cut',
    );
  });

  it('prefers paragraph and sentence boundaries', () => {
    const para = 'First paragraph sentence one. Sentence two is here.';
    const text = `${para}\n\n${'Second paragraph goes on. '.repeat(4)}`;
    const chunks = chunkText(text, { size: 80, overlap: 10 });
    assert.equal(chunks[0], para);
  });

  it('always makes progress on text without spaces', () => {
    const chunks = chunkText('x'.repeat(1000), { size: 100, overlap: 30 });
    assert.ok(chunks.length >= 10 && chunks.length < 20);
    assert.ok(chunks.every((c) => c.length <= 100));
  });
});

describe('htmlToText', () => {
  it('keeps visible text, drops head, scripts, styles and comments, decodes references', () => {
    const html =
      '<html><head><title>x</title></head><body><style>p{}</style><p>Fish &amp; chips&nbsp;&#8212; &#x41;<br>next</p><script>alert(1)</script><!-- no --><div>Last</div></body></html>';
    assert.equal(normalise(htmlToText(html)), 'Fish & chips — A\nnext\n\nLast');
  });

  it('leaves unknown entities and text with angle brackets readable', () => {
    assert.equal(normalise(htmlToText('<p>a &bogus; b 3 < 4</p>')), 'a &bogus; b 3 < 4');
  });
});

describe('detectType', () => {
  it('uses the part type, then the file extension for octet-stream or none', () => {
    assert.equal(detectType('text/plain; charset=utf-8', 'x.bin'), 'text/plain');
    assert.equal(detectType('application/octet-stream', 'notes.MD'), 'text/markdown');
    assert.equal(detectType(undefined, 'page.htm'), 'text/html');
    assert.equal(detectType('', 'a.pdf'), 'application/pdf');
    assert.equal(detectType('image/png', 'a.txt'), null);
    assert.equal(detectType('application/octet-stream', 'a.docx'), null);
  });
});
