/**
 * A Server-Sent Events client over node:http for the event-stream tests: collects messages (`id`,
 * `event`, JSON `data`) and comments, and tells when the server closed the stream. A refusal (not
 * 200) is read whole as the error envelope.
 */
import http from 'node:http';
import { patient } from './patience.js';

export interface SseMessage {
  id: number;
  event: string;
  data: Record<string, any>;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The error envelope of a refused request. */
  error?: Record<string, any>;
  messages: SseMessage[];
  comments: string[];
  /** Resolves when the server closed the stream. */
  ended: Promise<void>;
  /** The first message (from the start) matching `pred`. */
  waitFor(pred: (m: SseMessage) => boolean, timeoutMs?: number): Promise<SseMessage>;
  /** Resolves once `n` comments arrived. */
  waitForComments(n: number, timeoutMs?: number): Promise<void>;
  close(): void;
}

export function openSse(url: string, headers: Record<string, string> = {}, onMessage?: (m: SseMessage) => void): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { Accept: 'text/event-stream', ...headers } }, (res) => {
      const messages: SseMessage[] = [];
      const comments: string[] = [];
      const waiters = new Set<() => void>();
      const wake = () => {
        for (const w of [...waiters]) w();
      };
      let done = false;
      const ended = new Promise<void>((r) =>
        res.on('close', () => {
          done = true;
          wake();
          r();
        }),
      );
      const until = (check: () => boolean, timeoutMs: number, what: string) =>
        new Promise<void>((ok, fail) => {
          const test = () => {
            if (check()) {
              waiters.delete(test);
              clearTimeout(timer);
              ok();
            } else if (done) {
              waiters.delete(test);
              clearTimeout(timer);
              fail(new Error(`stream closed before ${what}; got ${JSON.stringify(messages).slice(0, 1500)}`));
            }
          };
          const timer = setTimeout(() => {
            waiters.delete(test);
            fail(new Error(`timed out waiting for ${what}; got ${JSON.stringify(messages).slice(0, 1500)}`));
          }, patient(timeoutMs));
          waiters.add(test);
          test();
        });
      const stream: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        messages,
        comments,
        ended,
        async waitFor(pred, timeoutMs = 20_000) {
          await until(() => messages.some(pred), timeoutMs, 'a matching message');
          return messages.find(pred)!;
        },
        waitForComments: (n, timeoutMs = 10_000) => until(() => comments.length >= n, timeoutMs, `${n} comments`),
        close: () => req.destroy(),
      };
      let text = '';
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          stream.error = JSON.parse(text) as Record<string, any>;
          resolve(stream);
        });
        return;
      }
      res.on('data', (d: string) => {
        text += d;
        let at: number;
        while ((at = text.indexOf('\n\n')) >= 0) {
          const block = text.slice(0, at);
          text = text.slice(at + 2);
          const fields: Record<string, string> = {};
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else {
              const colon = line.indexOf(':');
              fields[line.slice(0, colon)] = line.slice(colon + 1).replace(/^ /, '');
            }
          }
          if (fields.data !== undefined) {
            const m = { id: Number(fields.id), event: fields.event ?? 'message', data: JSON.parse(fields.data) };
            messages.push(m);
            onMessage?.(m);
          }
        }
        wake();
      });
      resolve(stream);
    });
    req.on('error', reject);
  });
}
