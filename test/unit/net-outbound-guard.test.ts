/** The outbound guard's address policy: only public unicast addresses may be called. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { blockedReason } from '../../src/net/outbound-guard.js';

const production = { production: true, allowList: [] };
const development = { production: false, allowList: [] };

describe('outbound address policy', () => {
  it('allows public unicast IPv4 and global unicast IPv6', () => {
    for (const a of ['8.8.8.8', '93.184.216.34', '2606:4700::1111', '2a00:1450:4001:82b::200e']) assert.equal(blockedReason(production, a, a), null, a);
  });

  it('blocks everything else in production, including forms that embed an internal IPv4 address', () => {
    for (const a of [
      '127.0.0.1',
      '::1',
      '10.0.0.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '255.255.255.255',
      '224.0.0.1',
      '::7f00:1',
      '::a9fe:a9fe',
      '::ffff:10.0.0.1',
      'fec0::1',
      '5f00::1',
      '100::1',
      '64:ff9b::7f00:1',
      '2001::1',
      '2002:7f00:1::1',
      '2001:db8::1',
      'fc00::1',
      'fe80::1',
      'ff02::1',
      '3fff::1',
    ]) {
      assert.notEqual(blockedReason(production, a, a), null, a);
    }
  });

  it('outside production allows loopback only', () => {
    for (const a of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) assert.equal(blockedReason(development, a, a), null, a);
    for (const a of ['10.0.0.1', '169.254.169.254', '::7f00:1', 'fd00::1']) assert.notEqual(blockedReason(development, a, a), null, a);
  });

  it('an allow-list entry (host, address or range) lets an internal address through', () => {
    assert.equal(blockedReason({ production: true, allowList: ['10.0.0.0/8'] }, '10.1.2.3', '10.1.2.3'), null);
    assert.equal(blockedReason({ production: true, allowList: ['internal.example'] }, 'internal.example', '10.1.2.3'), null);
  });
});
