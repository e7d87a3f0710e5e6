/**
 * The hostile benchmark's realtime client (scripts/bench/hostile.ts), in a process of its own so that
 * building and sending (masking) its frames costs the service's loop nothing: the service's own work
 * on them is what is measured. On {cmd: 'flood', url, frames: {kind, count, bytes?}} it opens the
 * session, waits for the greeting's turn, sends every frame at once (images of `bytes`, 2.9 MB by
 * default) and answers {result} at the first error frame or the socket's close, or at the answer's
 * turn when `kind` is `one`, or after 10 s. {cmd: 'exit'} stops.
 */
import { connect } from '../../../test/helpers/realtime.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

function frames(kind: string, count: number, bytes = 2.9 * 1024 * 1024): string[] {
  if (kind === 'image') {
    const jpeg = Buffer.alloc(bytes);
    jpeg.set([0xff, 0xd8, 0xff, 0xe0]);
    const frame = JSON.stringify({ mime_type: 'image/jpeg', data: jpeg.toString('base64') });
    return Array.from({ length: count }, () => frame);
  }
  return Array.from({ length: count }, (_, i) =>
    JSON.stringify({ mime_type: 'text/plain', data: b64(kind === 'one' ? 'My name is Ada.' : `Flood message ${i}`) }),
  );
}

async function flood(url: string, kind: string, count: number, bytes?: number): Promise<string> {
  const all = frames(kind, count, bytes);
  const c = connect(url);
  await c.next('session_started', 10_000);
  await c.next('turn_complete', 10_000).catch(() => undefined);
  for (const f of all) c.sendJson(f);
  await c.next((m) => m.type === 'error' || (kind === 'one' && m.type === 'turn_complete'), 10_000).catch(() => undefined);
  const errors = new Set(c.messages.filter((m) => m.type === 'error').map((m) => String(m.code)));
  const closed = c.ws.readyState === c.ws.CLOSED ? `; closed by the service with ${(await c.closed).code}` : '';
  await c.close();
  return `session ended; errors: ${[...errors].join(', ') || 'none'}${closed}`;
}

process.on('message', (m: { cmd: string; url: string; frames: { kind: string; count: number; bytes?: number } }) => {
  if (m.cmd === 'flood')
    void flood(m.url, m.frames.kind, m.frames.count, m.frames.bytes).then(
      (result) => process.send!({ result }),
      (err: Error) => process.send!({ result: `client error: ${err.message.slice(0, 80)}` }),
    );
  else if (m.cmd === 'exit') process.exit(0);
});
process.send!({ ready: true });
