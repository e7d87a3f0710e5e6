/**
 * The Content-Security-Policy of the pages the service serves. The dashboard loads its script from
 * here and talks only to this service; the API references (Redoc, built offline with its scripts
 * inlined) may run exactly the inline scripts they were built with, allowed by their SHA-256 hashes
 * computed from the page itself, never by 'unsafe-inline'.
 */
import { createHash } from 'node:crypto';
import { Parser } from 'htmlparser2';

/**
 * The WebSocket origin of the service's public URL: browsers before CSP Level 3 do not let 'self'
 * match ws:/wss: URLs, so the realtime socket's origin is named as well (and no other host is allowed).
 */
export function webSocketOrigin(publicBaseUrl: string): string {
  const url = new URL(publicBaseUrl);
  return `${url.protocol === 'https:' ? 'wss:' : 'ws:'}//${url.host}`;
}

/**
 * Scripts only from here (the page has no inline script); `blob:` for the microphone's AudioWorklet,
 * which the client library loads from a Blob URL it made itself. The widget's shadow root carries its
 * own <style>. Connections (the API, the realtime socket) only to this service.
 */
export function dashboardPolicy(publicBaseUrl: string): string {
  return [
    "default-src 'none'",
    "script-src 'self' blob:",
    "style-src 'self' 'unsafe-inline'",
    `connect-src 'self' ${webSocketOrigin(publicBaseUrl)}`,
    "img-src 'self' data:",
    "media-src 'self' blob:",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** `'sha256-…'` of the text of every inline <script> of `html` (a script with `src` is not inline), in order, without repeats. */
export function inlineScriptHashes(html: string): string[] {
  const hashes = new Set<string>();
  let text: string[] | null = null;
  const parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === 'script' && attrs.src === undefined) text = [];
      },
      ontext(data) {
        text?.push(data);
      },
      onclosetag(name) {
        if (name !== 'script' || !text) return;
        hashes.add(`'sha256-${createHash('sha256').update(text.join(''), 'utf8').digest('base64')}'`);
        text = null;
      },
    },
    { decodeEntities: false },
  );
  parser.end(html);
  return [...hashes];
}

/**
 * An API reference page: its own inline scripts (by hash) and nothing else to run; Redoc's styles
 * are injected at run time (styled-components) and its search index runs in a Worker from a Blob URL.
 * It fetches nothing (the document is inlined), submits nothing and is not framed.
 */
export function referencePolicy(html: string): string {
  return [
    "default-src 'none'",
    `script-src ${inlineScriptHashes(html).join(' ')}`,
    "style-src 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    'worker-src blob:',
    "form-action 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}
