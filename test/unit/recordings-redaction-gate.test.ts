/**
 * The redaction gate (src/recordings/redaction-gate.ts) in front of a recording's writer: audio held
 * until its spans are decided, a span to redact written as silence in its own channel only, spans
 * ending ahead of the audio received (agent audio queued), a cut agent utterance, the hold limit and
 * the end writing what is undecided as silence.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RedactionGate } from '../../src/recordings/redaction-gate.js';
import { MULAW_SILENCE } from '../../src/audio/pcm16.js';
import type { RecordingWriter } from '../../src/recordings/writer.js';

/** A writer that keeps what it is given; `flush()` runs the gate's release as the real one's timer does. */
function capture() {
  const out: Buffer[] = [];
  const writer = {
    beforeFlush: null as null | (() => void),
    append: (b: Buffer) => out.push(Buffer.from(b)),
    flush() {
      this.beforeFlush?.();
    },
    close: async () => undefined,
  };
  const stereo = () => {
    const all = Buffer.concat(out);
    return { left: [...all].filter((_, i) => i % 2 === 0), right: [...all].filter((_, i) => i % 2 === 1) };
  };
  return { writer, asWriter: writer as unknown as RecordingWriter, out, stereo };
}

/** `n` mu-law stereo frames, left byte `l`, right byte `r`. */
const frames = (n: number, l: number, r: number) => Buffer.from(Array.from({ length: n }, () => [l, r]).flat());
const S = MULAW_SILENCE;

describe('redaction gate', () => {
  it('holds audio until the span is decided; a span to redact is silence in its channel only', () => {
    const c = capture();
    const gate = new RedactionGate(c.asWriter, 'mulaw', 1000);
    gate.append(frames(10, 1, 2));
    c.writer.flush();
    assert.equal(c.out.length, 0, 'nothing written before the person span is decided');
    gate.person(10, true);
    gate.append(frames(5, 3, 4));
    gate.person(15, false);
    c.writer.flush();
    assert.deepEqual(c.stereo(), { left: [...Array(10).fill(S), ...Array(5).fill(3)], right: [...Array(10).fill(2), ...Array(5).fill(4)] });
  });

  it('an agent span ending ahead of the audio received silences it as it arrives; a cut one stops at the cut', () => {
    const c = capture();
    const gate = new RedactionGate(c.asWriter, 'mulaw', 1000);
    gate.person(0, false);
    gate.agentStarts(2);
    gate.append(frames(4, 1, 2));
    gate.agentEnds(8, true);
    gate.agentCut(6);
    gate.append(frames(6, 1, 2));
    gate.person(10, false);
    c.writer.flush();
    assert.deepEqual(c.stereo().right, [2, 2, S, S, S, S, 2, 2, 2, 2]);
    assert.deepEqual(c.stereo().left, Array(10).fill(1));
  });

  it('audio held past the limit in an open span, and what is undecided at the end, are written as silence', async () => {
    const c = capture();
    const gate = new RedactionGate(c.asWriter, 'pcm16', 4);
    const pcm = (n: number) => Buffer.from(Array.from({ length: n }, () => [1, 0, 2, 0]).flat());
    gate.append(pcm(10));
    c.writer.flush();
    const written = Buffer.concat(c.out);
    assert.equal(written.length, 6 * 4, 'all but the last 4 frames let go');
    for (let f = 0; f < 6; f++) assert.deepEqual([written.readInt16LE(f * 4), written.readInt16LE(f * 4 + 2)], [0, 2]);
    await gate.close();
    const all = Buffer.concat(c.out);
    assert.equal(all.length, 10 * 4);
    for (let f = 6; f < 10; f++) assert.deepEqual([all.readInt16LE(f * 4), all.readInt16LE(f * 4 + 2)], [0, 2]);
  });
});
