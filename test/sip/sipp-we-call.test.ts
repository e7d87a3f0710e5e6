/**
 * Our SIP user agent calls sipp (src/sip/): answered (our speech comes back through sipp's RTP echo,
 * its key reaches us, our BYE ends it), refused with 486, 480 and 603 (each SIP answer our outcome),
 * given up while it rings (CANCEL, 487: canceled), challenged for digest credentials (answered with
 * the trunk's; a wrong password ends in its 403), and transferred with REFER (202, then the NOTIFY of the target's 200).
 */
import { describe, it, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';
import type { CallEnded, SipCall, SipUserAgent, TransferProgress } from '../../src/sip/index.js';
import { DTMF_PCAPS, LOOPBACK, startSipp, testUserAgent } from '../helpers/sipp.js';

const SPEECH = path.resolve(import.meta.dirname, '../fixtures/audio/caller-question.ulaw-8k.raw');

function ended(call: SipCall): Promise<CallEnded> {
  return call.endedWith ? Promise.resolve(call.endedWith) : once(call, 'ended').then(([e]) => e as CallEnded);
}

function until<T>(call: SipCall, test: () => T | undefined): Promise<T> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const v = test();
      if (v !== undefined) {
        call.off('audio', check);
        resolve(v);
      }
    };
    call.on('audio', check);
    call.once('ended', () => reject(new Error('the call ended first')));
    check();
  });
}

describe('we call sipp', () => {
  let ua: SipUserAgent;
  before(async () => {
    ua = await testUserAgent();
  });
  after(() => ua?.stop());

  for (const tcp of [false, true]) {
    it(`over ${tcp ? 'TCP' : 'UDP'}: it rings, answers, hears us (echoed back whole), presses 3, and our BYE ends the call`, async () => {
      const sipp = await startSipp({ name: 'uas-answer.xml', vars: { DTMF_DIR: DTMF_PCAPS }, tcp, args: ['-rtp_echo'] });
      const call = await ua.invite({ host: LOOPBACK, port: sipp.port, transport: tcp ? 'tcp' : 'udp', to: '+15550003333', from: '+15550004444' });
      const events: string[] = [];
      call.on('ringing', () => events.push('ringing'));
      const keys: string[] = [];
      call.on('dtmf', (k) => keys.push(k));
      const audio: Buffer[] = [];
      call.on('audio', (pcm) => audio.push(pcm));
      await once(call, 'answered');
      events.push('answered');
      assert.equal(call.codec, 'PCMU');
      const speech = mulawToPcm16(fs.readFileSync(SPEECH));
      const whole = speech.subarray(0, Math.floor(speech.length / 320) * 320);
      call.sendAudio(whole);
      await until(call, () => (Buffer.concat(audio).indexOf(whole) >= 0 ? true : undefined));
      await until(call, () => (keys.length ? true : undefined));
      assert.deepEqual(keys, ['3']);
      call.hangup();
      assert.deepEqual(await ended(call), { outcome: 'completed', reason: 'local_hangup', by: 'local' });
      const r = await sipp.done;
      assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
      assert.deepEqual(events, ['ringing', 'answered']);
    });
  }

  for (const [status, outcome] of [
    [486, 'busy'],
    [480, 'no_answer'],
    [603, 'declined'],
  ] as const) {
    it(`a ${status} after ringing ends the call ${outcome}`, async () => {
      const sipp = await startSipp({ name: 'uas-status.xml', vars: { STATUS: String(status) } });
      const call = await ua.invite({ host: LOOPBACK, port: sipp.port, to: '+15550003333', from: '+15550004444' });
      const rang = once(call, 'ringing');
      assert.deepEqual(await ended(call), { outcome, reason: 'rejected', status, by: 'remote' });
      await rang;
      const r = await sipp.done;
      assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
    });
  }

  it('hanging up while it rings sends CANCEL; the 487 ends the call canceled', async () => {
    const sipp = await startSipp({ name: 'uas-cancel.xml' });
    const call = await ua.invite({ host: LOOPBACK, port: sipp.port, to: '+15550003333', from: '+15550004444' });
    await once(call, 'ringing');
    call.hangup();
    assert.deepEqual(await ended(call), { outcome: 'canceled', reason: 'local_hangup', status: 487, by: 'local' });
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
  });

  it('a 401 is answered once with the credentials: the right ones are let through, wrong ones end in 403 failed', async () => {
    const good = await startSipp({ name: 'uas-auth.xml', vars: { USERNAME: 'acme', PASSWORD: 's3cret' } });
    const call = await ua.invite({
      host: LOOPBACK,
      port: good.port,
      to: '+15550003333',
      from: '+15550004444',
      credentials: { username: 'acme', password: 's3cret' },
    });
    await once(call, 'answered');
    call.hangup();
    await ended(call);
    const r1 = await good.done;
    assert.equal(r1.code, 0, `sipp failed:\n${r1.stdout}\n${r1.errors}`);

    const bad = await startSipp({ name: 'uas-auth.xml', vars: { USERNAME: 'acme', PASSWORD: 's3cret' } });
    const refused = await ua.invite({
      host: LOOPBACK,
      port: bad.port,
      to: '+15550003333',
      from: '+15550004444',
      credentials: { username: 'acme', password: 'guess' },
    });
    assert.deepEqual(await ended(refused), { outcome: 'failed', reason: 'rejected', status: 403, by: 'remote' });
    const r2 = await bad.done;
    assert.equal(r2.code, 0, `sipp failed:\n${r2.stdout}\n${r2.errors}`);
  });

  it('REFER is accepted with 202 and the NOTIFY reports the target answered; then we hang up', async () => {
    const sipp = await startSipp({ name: 'uas-refer.xml' });
    const call = await ua.invite({ host: LOOPBACK, port: sipp.port, to: '+15550003333', from: '+15550004444' });
    await once(call, 'answered');
    const progress: TransferProgress[] = [];
    const done = new Promise<void>((resolve) =>
      call.on('transfer', (p) => {
        progress.push(p);
        if (p.final) resolve();
      }),
    );
    assert.equal(await call.refer('+15550005555'), 202);
    await done;
    assert.deepEqual(progress, [
      { status: 202, final: false },
      { status: 200, final: true },
    ]);
    call.hangup();
    await ended(call);
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
  });
});
