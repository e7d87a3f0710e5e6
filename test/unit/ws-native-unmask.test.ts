/**
 * ws unmasks every frame a client sends with the native `bufferutil` (a dependency for that alone):
 * without it ws falls back to a JavaScript loop a byte at a time, and forty of the largest realtime
 * frames allowed held the event loop 1.4 s (issue 32's image flood). This fails if the package goes
 * missing or ws stops using it.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);

describe('WebSocket unmasking', () => {
  it('ws unmasks with the native bufferutil, not its JavaScript fallback', () => {
    // ws does not export lib/buffer-util: loaded by its path, as ws itself loads it.
    const bufferUtil = require(path.join(path.dirname(require.resolve('ws')), 'lib/buffer-util.js')) as { unmask: (b: Buffer, m: Buffer) => void };
    assert.equal(process.env.WS_NO_BUFFER_UTIL, undefined);
    assert.equal(typeof (require('bufferutil') as { unmask: unknown }).unmask, 'function');
    // ws exports its own `_unmask` loop when no native one loaded, else a wrapper calling the native one.
    assert.notEqual(bufferUtil.unmask.name, '_unmask');
    assert.match(bufferUtil.unmask.toString(), /bufferUtil\.unmask|websocketUnmask/);
    const data = Buffer.from([0x10, 0x20, 0x30, 0x40, 0x50]);
    bufferUtil.unmask(data, Buffer.from([1, 2, 3, 4]));
    assert.deepEqual([...data], [0x11, 0x22, 0x33, 0x44, 0x51]);
  });
});
