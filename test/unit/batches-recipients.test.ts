/** Screening batch recipients: E.164 normalization, duplicates after normalization, CSV row problems merged in order. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeNumber, screenRecipients } from '../../src/batches/recipients.js';

describe('normalizeNumber', () => {
  it('removes what people write between digits and keeps E.164 only', () => {
    assert.equal(normalizeNumber('+1 (415) 555-0123'), '+14155550123');
    assert.equal(normalizeNumber('+44.20.7946.0958'), '+442079460958');
    for (const bad of ['4155550123', '+0123456', '+1', '+1234567890123456', '555-CALL-NOW', '+1 415 555 0123 ext 9', ''])
      assert.equal(normalizeNumber(bad), null, bad);
  });

  it('takes linear time on hostile input', () => {
    assert.equal(normalizeNumber(`+${' -'.repeat(100_000)}1`), null);
  });
});

describe('screenRecipients', () => {
  it('keeps the first of duplicates, skips invalid numbers, and orders skipped items by index', () => {
    const { accepted, skipped } = screenRecipients(
      [
        { index: 0, to_number: '+14155550123' },
        { index: 2, to_number: '+1 415 555 0123', row: 4 },
        { index: 3, to_number: 'nope', row: 5 },
      ],
      [{ index: 1, row: 3, column: null, reason: 'invalid_row', message: 'Row 3 has 1 field; the header has 2.', to_number: null }],
    );
    assert.deepEqual(
      accepted.map((a) => a.number),
      ['+14155550123'],
    );
    assert.deepEqual(
      skipped.map((s) => [s.index, s.row, s.reason]),
      [
        [1, 3, 'invalid_row'],
        [2, 4, 'duplicate'],
        [3, 5, 'invalid_number'],
      ],
    );
    assert.match(skipped[1].message, /^Row 4: \+14155550123 appears earlier/);
  });
});
