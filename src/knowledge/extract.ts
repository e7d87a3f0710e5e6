/**
 * Text extraction at upload: UTF-8 text and Markdown as they are, HTML's visible text, PDF's text layer
 * (unpdf, the maintained serverless build of Mozilla's pdf.js). Any failure is 422 `document_unreadable`.
 */
import { Parser } from 'htmlparser2';
import { extractText, getDocumentProxy } from 'unpdf';
import { unprocessable } from '../errors/api-error.js';

export type DocumentContentType = 'text/plain' | 'text/markdown' | 'text/html' | 'application/pdf';

const unreadable = (message: string) => unprocessable('document_unreadable', message, 'file');

export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes).replace(/^\uFEFF/, '');
  } catch {
    throw unreadable('The file is not valid UTF-8 text.');
  }
}

/** Elements whose content is never shown. */
const HIDDEN = new Set(['head', 'script', 'style', 'template', 'noscript', 'svg', 'iframe', 'object']);
const BLOCK = new Set(
  'address article aside blockquote br dd div dl dt fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section table tbody td tfoot th thead tr ul'.split(
    ' ',
  ),
);

/**
 * The visible text of an HTML document, by htmlparser2's streaming tokenizer (linear in the input,
 * whatever the markup: unclosed tags and comments included). Hidden elements' content is dropped,
 * block elements become line breaks, character references are decoded. For indexing, never rendering.
 */
export function htmlToText(html: string): string {
  const out: string[] = [];
  let hidden = 0;
  const parser = new Parser(
    {
      onopentagname(name) {
        // A <head> left open ends where the body starts.
        if (name === 'body') hidden = 0;
        else if (HIDDEN.has(name)) hidden++;
        else if (!hidden) out.push(BLOCK.has(name) ? '\n' : ' ');
      },
      onclosetag(name, implied) {
        if (HIDDEN.has(name)) hidden = Math.max(0, hidden - 1);
        else if (!hidden && !(implied && name === 'br')) out.push(BLOCK.has(name) ? '\n' : ' ');
      },
      ontext(text) {
        if (!hidden) out.push(text);
      },
    },
    { decodeEntities: true, lowerCaseTags: true, recognizeSelfClosing: true },
  );
  parser.end(html);
  return out.join('');
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

/** Normalises whitespace: NUL characters dropped (they cannot be stored), lines trimmed, runs of spaces and of blank lines collapsed. */
export function normalise(text: string): string {
  return text
    .replaceAll('\0', '')
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

const EXTENSIONS: Record<string, DocumentContentType> = {
  txt: 'text/plain',
  text: 'text/plain',
  md: 'text/markdown',
  markdown: 'text/markdown',
  html: 'text/html',
  htm: 'text/html',
  pdf: 'application/pdf',
};
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
