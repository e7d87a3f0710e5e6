/** HTTP plumbing shared by both simulated carriers: request bodies, answers, and outgoing requests. */
import type http from 'node:http';
import type { FormParams } from './signing.js';

const MAX_BODY = 1024 * 1024;
/** A carrier gives the service this long to answer one callback. */
const DELIVERY_TIMEOUT_MS = 15_000;
const MAX_ANSWER_CHARS = 64 * 1024;

export class BodyTooLarge extends Error {}

export function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new BodyTooLarge());
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Form parameters; a repeated name keeps every value in order. */
export function parseForm(body: string): FormParams {
  const out: FormParams = {};
  for (const [k, v] of new URLSearchParams(body)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

export function formValue(params: FormParams, name: string): string | undefined {
  const v = params[name];
  return Array.isArray(v) ? v[v.length - 1] : v;
}

export function formValues(params: FormParams, name: string): string[] {
  const v = params[name];
  return v === undefined ? [] : Array.isArray(v) ? v : [v];
}

export function encodeForm(params: FormParams): string {
  const out = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
  return out.toString();
}

export interface Delivery {
  /** null when no HTTP answer came (network error, timeout, or the carrier shut down). */
  status: number | null;
  body: string;
  error?: string;
}

/** One request from the carrier to the service: no redirects, a deadline, the answer's text capped. */
export async function deliver(url: string, init: { method: string; headers: Record<string, string>; body?: string }, signal: AbortSignal): Promise<Delivery> {
  try {
    const res = await fetch(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      redirect: 'manual',
      signal: AbortSignal.any([signal, AbortSignal.timeout(DELIVERY_TIMEOUT_MS)]),
    });
    const body = (await res.text()).slice(0, MAX_ANSWER_CHARS);
    return { status: res.status, body };
  } catch (err) {
    return { status: null, body: '', error: (err as Error).message };
  }
}

/** Runs tasks one after another (a call's callbacks go out in order, each awaited). */
export class SerialQueue {
  private tail: Promise<void> = Promise.resolve();

  push(task: () => Promise<void>): Promise<void> {
    const run = this.tail.then(task);
    this.tail = run.catch(() => undefined);
    return this.tail;
  }
}
