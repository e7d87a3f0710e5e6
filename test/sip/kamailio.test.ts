/**
 * kamailio (Debian's) as an authenticating trunk proxy in front of our SIP user agent (src/sip/): sipp
 * calls through it, kamailio challenges (407) and record-routes, our agent takes the call from the
 * proxy's address, and our BYE finds its way back through the proxy by the route set.
 */
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import type { CallEnded, InboundRequest, SipCall, SipUserAgent } from '../../src/sip/index.js';
import { freePort, LOOPBACK, scenario, startSipp, testUserAgent } from '../helpers/sipp.js';

function ended(call: SipCall): Promise<CallEnded> {
  return call.endedWith ? Promise.resolve(call.endedWith) : once(call, 'ended').then(([e]) => e as CallEnded);
}

async function startKamailio(agentPort: number, password: string): Promise<{ port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const { dir, file } = scenario('kamailio-trunk.cfg', { PROXY_PORT: String(port), AGENT_PORT: String(agentPort), PASSWORD: password });
  fs.mkdirSync(path.join(dir, 'run'));
  const child: ChildProcess = spawn('kamailio', ['-DD', '-E', '-f', file, '-Y', path.join(dir, 'run'), '-w', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  while (!/SO_RCVBUF is finally/.test(out)) {
    if (gone) throw new Error(`kamailio did not start:\n${out.slice(-3000)}`);
    await new Promise((r) => child.stderr!.once('data', r).once('close', r));
  }
  return {
    port,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('kamailio as an authenticating trunk proxy in front of us', () => {
  let ua: SipUserAgent;
  let proxy: { port: number; stop: () => Promise<void> } | undefined;
  after(async () => {
    await ua?.stop();
    await proxy?.stop();
  });

  it('a call challenged and record-routed by the proxy reaches us from it, and our BYE goes back through it', async () => {
    const asked: InboundRequest[] = [];
    ua = await testUserAgent({
      authenticateInbound: (r) => {
        asked.push(r);
        return r.source.address === LOOPBACK && r.source.port === proxy?.port ? { action: 'allow', context: 'kamailio' } : { action: 'refuse' };
      },
    });
    proxy = await startKamailio(ua.port, 's3cret');
    const incoming = new Promise<SipCall>((resolve) =>
      ua.once('incoming', (call) => {
        void call.answer();
        resolve(call);
      }),
    );
    const sipp = await startSipp({ name: 'uac-proxy.xml', vars: { USERNAME: 'acme', PASSWORD: 's3cret' }, target: `${LOOPBACK}:${proxy.port}` });
    const call = await incoming;
    assert.equal(call.context, 'kamailio');
    await once(call, 'answered');
    assert.ok(call.dialog!.routeSet.length > 0, 'the proxy record-routed the call');
    call.hangup();
    assert.deepEqual(await ended(call), { outcome: 'completed', reason: 'local_hangup', by: 'local' });
    const r = await sipp.done;
    assert.equal(r.code, 0, `sipp failed:\n${r.stdout}\n${r.errors}`);
    assert.equal(asked.length, 1, 'the challenge was the proxy’s: only the authenticated INVITE reached us');
  });
});
