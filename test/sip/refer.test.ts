/**
 * REFER between two user agents of ours (RFC 3515): the service's kind refuses a peer's REFER with
 * 403 (no call is relayed anywhere but to the agent); one made with `acceptRefer` (the sandbox's far
 * end, which plays the phone network) takes it with 202, and the NOTIFY it sends reaches the referrer
 * as the transfer's final status.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { ReferRequest, SipCall, SipUserAgent, TransferProgress } from '../../src/sip/index.js';
import { LOOPBACK, testUserAgent } from '../helpers/sipp.js';

describe('REFER', () => {
  let referrer: SipUserAgent;
  let refuses: SipUserAgent;
  let accepts: SipUserAgent;
  before(async () => {
    referrer = await testUserAgent();
    refuses = await testUserAgent();
    accepts = await testUserAgent({ acceptRefer: true });
  });
  after(async () => {
    await Promise.all([referrer?.stop(), refuses?.stop(), accepts?.stop()]);
  });

  /** A call from the referrer to `ua`, answered: both ends. */
  async function call(ua: SipUserAgent): Promise<{ ours: SipCall; theirs: SipCall }> {
    const incoming = once(ua, 'incoming') as Promise<[SipCall]>;
    const ours = await referrer.invite({ host: LOOPBACK, port: ua.port, to: '+15550002222', from: '+15550001111' });
    const [theirs] = await incoming;
    await theirs.answer();
    await once(ours, 'answered');
    return { ours, theirs };
  }

  it('is refused with 403 by a user agent without acceptRefer', async () => {
    const { ours, theirs } = await call(refuses);
    let referred = false;
    theirs.on('referred', () => (referred = true));
    assert.equal(await ours.refer('+15550003333'), 403);
    assert.equal(referred, false);
    ours.hangup();
    await once(theirs, 'ended');
  });

  it('is taken with 202 by one with acceptRefer; its NOTIFY is the final status of the transfer', async () => {
    const { ours, theirs } = await call(accepts);
    const referred = once(theirs, 'referred') as Promise<[ReferRequest]>;
    const progress: TransferProgress[] = [];
    const final = new Promise<void>((resolve) =>
      ours.on('transfer', (p) => {
        progress.push(p);
        if (p.final) resolve();
      }),
    );
    assert.equal(await ours.refer('+15550003333'), 202);
    const [request] = await referred;
    assert.equal(request.user, '+15550003333');
    theirs.notifyTransfer(200);
    await final;
    assert.deepEqual(progress.at(-1), { status: 200, final: true });
    ours.hangup();
    await once(theirs, 'ended');
  });
});
