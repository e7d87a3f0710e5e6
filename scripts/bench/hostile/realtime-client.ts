/**
 * The hostile benchmark's realtime client (scripts/bench/hostile.ts), in a process of its own so that
 * building and sending its frames costs the service's loop nothing: the service's own work on them is
 * what is measured. {cmd: 'build', frames: {kind, count, bytes?}} builds the frames of the next flood
 * before its phase (images of `bytes`, 2.9 MB by default) and answers {built}; {cmd: 'flood', url}
 * opens the session, waits for the greeting's turn, sends every frame at once and answers {result} at
 * the first error frame or the socket's close, or at the answer's turn when the frames are `one`, or
 * after 10 s. The frames go out with a zero masking key, so sending them costs this process (on the
 * service's cores) no masking pass over each byte: an attacker masks on a machine of its own.
 * {cmd: 'exit'} stops.
 */
import { connect } from '../../../test/helpers/realtime.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

function frames(kind: string, count: number, bytes = 2.9 * 1024 * 1024): Buffer[] {
  if (kind === 'image') {
    const jpeg = Buffer.alloc(bytes);
    jpeg.set([0xff, 0xd8, 0xff, 0xe0]);
    const frame = Buffer.from(JSON.stringify({ mime_type: 'image/jpeg', data: jpeg.toString('base64') }));
    return Array.from({ length: count }, () => frame);
  }
  return Array.from({ length: count }, (_, i) =>
    Buffer.from(JSON.stringify({ mime_type: 'text/plain', data: b64(kind === 'one' ? 'My name is Ada.' : `Flood message ${i}`) })),
  );
}

let built: { kind: string; frames: Buffer[] } = { kind: 'none', frames: [] };

async function flood(url: string): Promise<string> {
  const { kind, frames: all } = built;
  const c = connect(url, { generateMask: (mask) => mask.fill(0) });
  await c.next('session_started', 10_000);
  await c.next('turn_complete', 10_000).catch(() => undefined);
  for (const f of all) c.ws.send(f, { binary: false });
  // The service's close frame (1009) shows as CLOSING; the close itself waits for what was sent to be read.
  let closing: NodeJS.Timeout | undefined;
  await Promise.race([
    c.next((m) => m.type === 'error' || (kind === 'one' && m.type === 'turn_complete'), 10_000).catch(() => undefined),
    new Promise<void>((resolve) => (closing = setInterval(() => c.ws.readyState !== c.ws.OPEN && resolve(), 50))),
  ]);
  clearInterval(closing);
  const errors = new Set(c.messages.filter((m) => m.type === 'error').map((m) => String(m.code)));
  const byService = c.ws.readyState !== c.ws.OPEN;
  const { code } = await c.close();
  return `session ended; errors: ${[...errors].join(', ') || 'none'}${byService ? `; closed by the service with ${code}` : ''}`;
}

process.on('message', (m: { cmd: string; url: string; frames: { kind: string; count: number; bytes?: number } }) => {
  if (m.cmd === 'build') {
    built = { kind: m.frames.kind, frames: frames(m.frames.kind, m.frames.count, m.frames.bytes) };
    process.send!({ built: built.frames.length });
  } else if (m.cmd === 'flood')
    void flood(m.url).then(
      (result) => process.send!({ result }),
      (err: Error) => process.send!({ result: `client error: ${err.message.slice(0, 80)}` }),
    );
  else if (m.cmd === 'exit') process.exit(0);
});
process.send!({ ready: true });
