/**
 * A realtime session's socket is read at its byte budget (issue 32's flood of in-limit images): the
 * burst at once, then REALTIME_READ_BYTES_PER_SECOND, the rest left to TCP in the client. Frames past
 * their size cap are each still read and answered, at that pace, and the session goes on. No figure
 * in ms: the answers that have arrived are held to what the budget lets through in the time the test
 * itself measured, a bound a slower machine only stays further within.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { connect, createAgent, mintSession, type Client } from '../helpers/realtime.js';

const RATE = 65_536;
const BURST = 65_536;
/** One read of the socket (libuv's 64 KiB): the budget is taken after a chunk is read. */
const CHUNK = 65_536;

let t: TestService;
let tn: Tenant;
let agentId: string;
before(async () => {
  t = await startTestService({ REALTIME_READ_BYTES_PER_SECOND: String(RATE), REALTIME_READ_BURST_BYTES: String(BURST) });
  tn = await tenant(t);
  agentId = await createAgent(t, tn);
});
after(() => t.close());

const tooLong = (c: Client) => c.messages.filter((m) => m.type === 'error' && m.code === 'text_too_long').length;

describe('the read budget of a realtime session (issue 32)', () => {
  it('a flood of frames past their cap is read at the budget, each answered in turn; the session goes on', async () => {
    const c = connect((await mintSession(t, tn, agentId, 'voice')).ws_url);
    await c.next('session_started');
    // 20 KiB of text: over the 16 KiB cap of a typed message, in a frame of about 27 KB.
    const frame = Buffer.from(JSON.stringify({ mime_type: 'text/plain', data: Buffer.alloc(20 * 1024, 0x61).toString('base64') }));
    const FRAMES = 12;
    const sent = performance.now();
    for (let i = 0; i < FRAMES; i++) c.ws.send(frame, { binary: false });
    await c.next((m) => m.type === 'error' && m.code === 'text_too_long', 10_000);
    await c.next((m) => m.type === 'error' && m.code === 'text_too_long', 10_000);
    const answered = tooLong(c);
    const seconds = (performance.now() - sent) / 1000;
    const allowed = Math.floor((BURST + RATE * seconds + CHUNK) / frame.length);
    assert.ok(answered <= allowed, `${answered} of ${FRAMES} frames read in ${seconds.toFixed(2)} s; the budget allows ${allowed}`);
    assert.ok(answered < FRAMES, 'the flood is not read at once');
    // Read on at the budget's pace: every frame is answered in the end.
    await c.next((m) => m.type === 'error' && m.code === 'text_too_long' && tooLong(c) === FRAMES, 60_000);
    assert.equal(c.ws.readyState, c.ws.OPEN);
    c.ws.send(JSON.stringify({ mime_type: 'text/plain', data: Buffer.from('What are your opening hours?').toString('base64') }));
    await c.next((m) => m.type === 'transcript' && m.role === 'user' && m.text === 'What are your opening hours?', 10_000);
    await c.close();
  });
});
