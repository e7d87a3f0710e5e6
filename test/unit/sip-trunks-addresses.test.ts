import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normaliseSourceAddress, parseHost, parseSource, showHost, showSource } from '../../src/sip-trunks/addresses.js';

describe('sip trunk addresses', () => {
  it('reads sources as cidr, refusing host bits with the network meant', () => {
    assert.deepEqual(parseSource('203.0.113.0/24'), { ok: true, cidr: '203.0.113.0/24' });
    assert.deepEqual(parseSource('198.51.100.7'), { ok: true, cidr: '198.51.100.7/32' });
    assert.deepEqual(parseSource('2001:DB8:0::/32'), { ok: true, cidr: '2001:db8::/32' });
    assert.deepEqual(parseSource('2001:db8::1'), { ok: true, cidr: '2001:db8::1/128' });
    assert.deepEqual(parseSource('0.0.0.0/0'), { ok: true, cidr: '0.0.0.0/0' });
    assert.deepEqual(parseSource('203.0.113.7/24'), { ok: false, suggestion: '203.0.113.0/24' });
    assert.deepEqual(parseSource('2001:db8::1/32'), { ok: false, suggestion: '2001:db8::/32' });
    for (const bad of [
      '127.1',
      '0x7f.0.0.1',
      '10.0.0.0/33',
      '10.0.0.0/',
      '10.0.0.0/-1',
      '10.0.0.0/1a',
      'fe80::1%eth0',
      '::/129',
      'host.example',
      '1.2.3.4.5',
      '',
    ])
      assert.deepEqual(parseSource(bad), { ok: false, suggestion: null }, bad);
  });

  it('shows a single address without its prefix', () => {
    assert.equal(showSource('198.51.100.7/32'), '198.51.100.7');
    assert.equal(showSource('2001:db8::1/128'), '2001:db8::1');
    assert.equal(showSource('203.0.113.0/24'), '203.0.113.0/24');
  });

  it('reads an IPv4-mapped source as its IPv4 address', () => {
    assert.equal(normaliseSourceAddress('::ffff:203.0.113.9'), '203.0.113.9');
    assert.equal(normaliseSourceAddress('203.0.113.9'), '203.0.113.9');
    assert.equal(normaliseSourceAddress('2001:DB8::1'), '2001:db8::1');
    assert.equal(normaliseSourceAddress('localhost'), null);
  });

  it('reads host[:port]', () => {
    assert.deepEqual(parseHost('sip.Carrier.example'), { ok: true, value: { host: 'sip.carrier.example', port: null } });
    assert.deepEqual(parseHost('203.0.113.1:5080'), { ok: true, value: { host: '203.0.113.1', port: 5080 } });
    assert.deepEqual(parseHost('[2001:db8::1]:5061'), { ok: true, value: { host: '2001:db8::1', port: 5061 } });
    for (const bad of ['sip.example:0', 'sip.example:65536', '300.1.1.1', '[203.0.113.1]', '2001:db8::1', 'a..b', '-a.example', 'a_b.example', 'sip.example:'])
      assert.equal(parseHost(bad).ok, false, bad);
    assert.equal(showHost('2001:db8::1', 5060), '[2001:db8::1]:5060');
    assert.equal(showHost('sip.example', 5061), 'sip.example:5061');
  });
});
