/**
 * SIP over TLS (src/sip/transport.ts): a user agent with a configured certificate takes a call over
 * TLS from another user agent (Debian's sipp is built without TLS, so it cannot be the peer here);
 * the certificate is a throwaway self-signed one made with the openssl command for the test.
 */
import { describe, it, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { mulawToPcm16 } from '../../src/audio/pcm16.js';
import type { CallEnded, SipCall, SipUserAgent } from '../../src/sip/index.js';
import { LOOPBACK, testUserAgent } from '../helpers/sipp.js';

function selfSigned(): { key: Buffer; cert: Buffer; dir: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sip-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-keyout',
      'key.pem',
      '-out',
      'cert.pem',
    ],
    { cwd: dir, stdio: 'ignore' },
  );
  return { key: fs.readFileSync(path.join(dir, 'key.pem')), cert: fs.readFileSync(path.join(dir, 'cert.pem')), dir };
}

function ended(call: SipCall): Promise<CallEnded> {
  return call.endedWith ? Promise.resolve(call.endedWith) : once(call, 'ended').then(([e]) => e as CallEnded);
}

describe('SIP over TLS', () => {
  let server: SipUserAgent;
  let client: SipUserAgent;
  let certDir: string;
  before(async () => {
    const { key, cert, dir } = selfSigned();
    certDir = dir;
    server = await testUserAgent({ transports: ['udp', 'tcp', 'tls'], tls: { port: 0, key, cert } });
    client = await testUserAgent();
  });
  after(async () => {
    await client?.stop();
    await server?.stop();
    fs.rmSync(certDir, { recursive: true, force: true });
  });

  it('a call over TLS is answered, carries audio, and ends with BYE over the same connection', async () => {
    const incoming = new Promise<SipCall>((resolve) =>
      server.once('incoming', (call) => {
        void call.answer();
        resolve(call);
      }),
    );
    const call = await client.invite({ host: LOOPBACK, port: server.tlsPort, transport: 'tls', to: '+15550002222', from: '+15550001111' });
    const callee = await incoming;
    assert.equal(callee.peer.transport, 'tls');
    assert.match(callee.to.uri, /^sips:/);
    await once(call, 'answered');
    const heard: Buffer[] = [];
    callee.on('audio', (pcm) => heard.push(pcm));
    const frame = mulawToPcm16(Buffer.from(Array.from({ length: 160 }, (_, i) => (i % 2 ? 0x20 : 0xa0)))); // levels G.711 carries exactly
    call.sendAudio(frame);
    while (!heard.some((f) => f.equals(frame))) await once(callee, 'audio');
    callee.hangup();
    assert.deepEqual(await ended(call), { outcome: 'completed', reason: 'remote_hangup', by: 'remote' });
    assert.deepEqual(await ended(callee), { outcome: 'completed', reason: 'local_hangup', by: 'local' });
  });
});
