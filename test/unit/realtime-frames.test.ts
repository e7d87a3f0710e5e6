/**
 * Pure parts of realtime: frame validation order, strict base64, the size caps, the quick read of a
 * frame (peekFrame: what parseFrame would find, without parsing), the client address behind proxies.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { IncomingMessage } from 'node:http';
import { decodeBase64, MAX_IMAGE_BYTES, MAX_TEXT_MESSAGE_BYTES, parseFrame, peekFrame } from '../../src/realtime/frames.js';
import { clientAddressResolver } from '../../src/net/client-address.js';
import { sessionWsUrl } from '../../src/realtime/tokens.js';
import { loadConfig, ConfigError } from '../../src/config.js';

const code = (raw: string) => {
  const f = parseFrame(raw, false);
  return f.ok ? 'ok' : f.code;
};

describe('frame validation', () => {
  it('checks in the order of the spec table: the first failing field decides', () => {
    assert.equal(code(JSON.stringify({ mime_type: 5 })), 'invalid_mime_type', 'mime_type before data');
    assert.equal(code(JSON.stringify({ mime_type: 'video/mp4', data: 5 })), 'unsupported_mime_type');
    assert.equal(code(JSON.stringify({ mime_type: 'audio/pcm', data: 5 })), 'invalid_data');
    assert.equal(code(JSON.stringify({ mime_type: 'audio/pcm', data: 'AAAA', extra: true })), 'ok', 'extra fields are ignored');
  });

  it('decodes base64 strictly, with or without padding, after a complete data URL prefix', () => {
    assert.deepEqual(decodeBase64('AAEC'), Buffer.from([0, 1, 2]));
    assert.deepEqual(decodeBase64('AAE'), Buffer.from([0, 1]));
    assert.deepEqual(decodeBase64('AAE='), Buffer.from([0, 1]));
    assert.deepEqual(decodeBase64('data:audio/pcm;base64,AAE='), Buffer.from([0, 1]));
    for (const bad of ['A', 'AAE=A', 'AA==AA', 'AA E', 'AA-_', 'data:audio/pcm;base64', 'data:audio/pcm,AAEC', 'AAE=='])
      assert.equal(decodeBase64(bad), null, bad);
  });

  it('accepts exactly the strings of the strict base64 grammar, whatever characters they hold', () => {
    // The definition decodeBase64 must agree with: the alphabet, then up to two '=' completing the last group.
    const reference = (s: string): Buffer | null => {
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s)) return null;
      const unpadded = s.replace(/=+$/, '');
      if (unpadded.length % 4 === 1 || (s.length !== unpadded.length && s.length % 4 !== 0)) return null;
      return Buffer.from(s, 'base64');
    };
    const chars = [...'ABCXYZabcxyz0189+/', '=', '-', '_', ' ', '\n', '!', '.', '\0', 'é', 'ÿ', 'Ł', 'Ё', '😀', '\u0141', '\u0100'];
    const anyString = fc.array(fc.constantFrom(...chars), { maxLength: 40 }).map((a) => a.join(''));
    // Valid encodings with one character changed, inserted or removed: the cases a length check could miss.
    const nearlyValid = fc
      .tuple(fc.uint8Array({ maxLength: 30 }), fc.boolean(), fc.nat(), fc.constantFrom(...chars), fc.constantFrom('replace', 'insert', 'delete'))
      .map(([bytes, pad, at, c, how]) => {
        let s = Buffer.from(bytes).toString('base64');
        if (!pad) s = s.replace(/=+$/, '');
        const i = s.length ? at % s.length : 0;
        return how === 'replace' ? s.slice(0, i) + c + s.slice(i + 1) : how === 'insert' ? s.slice(0, i) + c + s.slice(i) : s.slice(0, i) + s.slice(i + 1);
      });
    fc.assert(
      fc.property(fc.oneof(anyString, nearlyValid), (s) => {
        assert.deepEqual(decodeBase64(s), reference(s), JSON.stringify(s));
        assert.deepEqual(decodeBase64(`data:audio/pcm;base64,${s}`), reference(s), JSON.stringify(s));
      }),
      { numRuns: 20_000 },
    );
  });
});

describe('size caps and the quick read of a frame', () => {
  const frame = (mimeType: string, bytes: number) => JSON.stringify({ mime_type: mimeType, data: Buffer.alloc(bytes, 0x41).toString('base64') });

  it('a typed message is at most 16 KiB and an image at most 2 MiB', () => {
    assert.equal(code(frame('text/plain', MAX_TEXT_MESSAGE_BYTES)), 'ok');
    assert.equal(code(frame('text/plain', MAX_TEXT_MESSAGE_BYTES + 1)), 'text_too_long');
    assert.equal(code(frame('image/jpeg', MAX_IMAGE_BYTES)), 'ok');
    assert.equal(code(frame('image/jpeg', MAX_IMAGE_BYTES + 1)), 'image_too_large');
    assert.equal(code(frame('audio/pcm', MAX_IMAGE_BYTES + 1)), 'ok', 'audio is held to its budget, not a size');
  });

  it('reads what parseFrame would find from a frame of the usual shape, in either order, with any JSON whitespace', () => {
    const mime = fc.constantFrom('audio/pcm', 'image/jpeg', 'text/plain');
    const ws = fc.constantFrom('', ' ', '\n', '\t ', '\r\n  ');
    fc.assert(
      fc.property(
        mime,
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        ws,
        ws,
        (m, bytes, dataFirst, pad, dataUrl, a, b) => {
          let data = Buffer.from(bytes).toString('base64');
          if (!pad) data = data.replace(/=+$/, '');
          if (dataUrl) data = `data:${m};base64,${data}`;
          const fields = [`"mime_type"${a}:${b}"${m}"`, `"data"${b}:${a}"${data}"`];
          const raw = `${a}{${b}${(dataFirst ? fields.reverse() : fields).join(`${a},${b}`)}${a}}${b}`;
          const parsed = parseFrame(raw, false);
          assert.ok(parsed.ok, raw);
          assert.deepEqual(peekFrame(Buffer.from(raw)), { mimeType: parsed.mimeType, bytes: parsed.bytes.length }, raw);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('leaves every other shape to parseFrame', () => {
    for (const raw of [
      '{"mime_type":"audio/pcm","data":"AAAA","seq":1}',
      '{"seq":1,"mime_type":"audio/pcm","data":"AAAA"}',
      '{"mime_type":"audio/pcm","data":"AA\\u0041A"}',
      '{"mime_type":"audio/webm","data":"AAAA"}',
      '{"mime_type":"audio/pcm","data":"AAAA"',
      '{"mime_type":"audio/pcm","data":"AAAA"}}',
      '{"data":"AAAA","mime_type":"text/plain","mime_type":"audio/pcm"}',
      '{"mime_type":"audio/pcm","data":5}',
      '{"mime_type":"image/jpeg","data":"data:image/jpeg;base64"}',
      '[{"mime_type":"audio/pcm","data":"AAAA"}]',
      'not json',
      '',
    ]) {
      assert.equal(peekFrame(Buffer.from(raw)), null, raw);
    }
  });
});

describe('client address', () => {
  const req = (peer: string, xff?: string) =>
    ({ socket: { remoteAddress: peer }, headers: xff ? { 'x-forwarded-for': xff } : {} }) as unknown as IncomingMessage;

  it('is the socket peer by default, whatever X-Forwarded-For says', () => {
    const resolve = clientAddressResolver([]);
    assert.equal(resolve(req('127.0.0.5', '203.0.113.9')), '127.0.0.5');
    assert.equal(resolve(req('::ffff:10.1.2.3')), '10.1.2.3');
  });

  it('behind a trusted proxy: the right-most forwarded address that is not a trusted proxy', () => {
    const resolve = clientAddressResolver(['10.0.0.0/8', '192.0.2.1']);
    assert.equal(resolve(req('10.0.0.2', '203.0.113.9, 10.0.0.7')), '203.0.113.9');
    assert.equal(resolve(req('192.0.2.1', '198.51.100.1, 203.0.113.9')), '203.0.113.9', 'a spoofed left-most entry is not believed');
    assert.equal(resolve(req('10.0.0.2')), '10.0.0.2');
    assert.equal(resolve(req('10.0.0.2', 'garbage')), '10.0.0.2');
    assert.equal(resolve(req('198.51.100.7', '203.0.113.9')), '198.51.100.7', 'an untrusted peer');
  });

  it('TRUSTED_PROXIES must hold addresses or CIDR ranges', () => {
    assert.deepEqual(loadConfig({ TRUSTED_PROXIES: '10.0.0.0/8, ::1' }).TRUSTED_PROXIES, ['10.0.0.0/8', '::1']);
    assert.throws(
      () => loadConfig({ TRUSTED_PROXIES: 'proxy.local' }),
      (e: Error) => e instanceof ConfigError && /TRUSTED_PROXIES/.test(e.message),
    );
  });
});

describe('ws_url', () => {
  it('turns PUBLIC_BASE_URL into ws(s):// with the path and the token', () => {
    assert.equal(sessionWsUrl('https://voice.example.com', 'u-1', 'rts_x'), 'wss://voice.example.com/ws/u-1?token=rts_x');
    assert.equal(sessionWsUrl('http://localhost:3000/', 'u.2', 'rts_y'), 'ws://localhost:3000/ws/u.2?token=rts_y');
    assert.equal(sessionWsUrl('https://example.com/base', 'u', 't'), 'wss://example.com/base/ws/u?token=t');
  });
});
