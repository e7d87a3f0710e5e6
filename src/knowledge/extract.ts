/**
 * Text extraction at upload: UTF-8 text and Markdown as they are, HTML's visible text, PDF's text layer
 * (unpdf, the maintained serverless build of Mozilla's pdf.js). Any failure is 422 `document_unreadable`.
 */
import { extractText, getDocumentProxy } from 'unpdf';
import { unprocessable } from '../http/errors.js';

export type DocumentContentType = 'text/plain' | 'text/markdown' | 'text/html' | 'application/pdf';

const unreadable = (message: string) => unprocessable('document_unreadable', message, 'file');

export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes).replace(/^\uFEFF/, '');
  } catch {
    throw unreadable('The file is not valid UTF-8 text.');
  }
}

const NAMED_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', ndash: '–', mdash: '—', hellip: '…', copy: '©', reg: '®', trade: '™', lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', euro: '€', pound: '£' };

function decodeEntities(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, e: string) => {
    if (e[0] === '#') {
      const code = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : m;
    }
    return NAMED_ENTITIES[e.toLowerCase()] ?? m;
  });
}

const BLOCK = 'address|article|aside|blockquote|br|dd|div|dl|dt|fieldset|figcaption|figure|footer|form|h[1-6]|header|hr|li|main|nav|ol|p|pre|section|table|tbody|td|tfoot|th|thead|tr|ul';

/**
 * The visible text of an HTML document. Hand-written because no HTML parser is among the installed
 * packages: it drops comments, <head>, and the content of script/style/template/noscript/svg, turns
 * block elements into line breaks, removes the remaining tags and decodes character references. It is
 * for indexing text, never for rendering, so an odd document costs at most a stray word in the index.
 */
export function htmlToText(html: string): string {
  return decodeEntities(
    html
      .replace(/<!--[\s\S]*?(-->|$)/g, ' ')
      .replace(/<!doctype[^>]*>/gi, ' ')
      .replace(/<head\b[\s\S]*?(<\/head\s*>|$)/gi, ' ')
      .replace(/<(script|style|template|noscript|svg)\b[\s\S]*?(<\/\1\s*>|$)/gi, ' ')
      .replace(new RegExp(`</?(?:${BLOCK})\\b[^>]*>`, 'gi'), '\n')
      .replace(/<\/?[a-z][^>]*>/gi, ' '),
  );
}

async function pdfText(bytes: Uint8Array): Promise<string> {
  let text: string;
  try {
    const pdf = await getDocumentProxy(new Uint8Array(bytes));
    try {
      text = (await extractText(pdf, { mergePages: true })).text;
    } finally {
      await pdf.destroy().catch(() => undefined);
    }
  } catch {
    throw unreadable('The PDF could not be read; it may be damaged or encrypted.');
  }
  if (!text.trim()) throw unreadable('The PDF has no text layer (a scanned or image-only PDF); only PDFs with text can be indexed.');
  return text;
}

/** Normalises whitespace: lines trimmed, runs of spaces and of blank lines collapsed. */
export function normalise(text: string): string {
  return text
    .replace(/\r\n?/g, '\n')
    .replace(/[\t\f\v\u00A0 ]+/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
}

export async function extract(type: DocumentContentType, bytes: Uint8Array): Promise<string> {
  switch (type) {
    case 'application/pdf':
      return normalise(await pdfText(bytes));
    case 'text/html':
      return normalise(htmlToText(decodeUtf8(bytes)));
    default:
      return normalise(decodeUtf8(bytes));
  }
}

const EXTENSIONS: Record<string, DocumentContentType> = { txt: 'text/plain', text: 'text/plain', md: 'text/markdown', markdown: 'text/markdown', html: 'text/html', htm: 'text/html', pdf: 'application/pdf' };
const TYPES = new Set<string>(['text/plain', 'text/markdown', 'text/x-markdown', 'text/html', 'application/pdf']);

/** The part's Content-Type, or the file extension when that is missing or application/octet-stream; null: unsupported. */
export function detectType(partType: string | null | undefined, filename: string | null | undefined): DocumentContentType | null {
  const type = (partType ?? '').split(';')[0].trim().toLowerCase();
  if (type && type !== 'application/octet-stream') {
    if (!TYPES.has(type)) return null;
    return type === 'text/x-markdown' ? 'text/markdown' : (type as DocumentContentType);
  }
  const ext = (filename ?? '').toLowerCase().match(/\.([a-z]+)$/)?.[1];
  return ext ? (EXTENSIONS[ext] ?? null) : null;
}
