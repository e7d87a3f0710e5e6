/** Screening batch recipients: E.164 normalization, duplicates after normalization, CSV row problems merged in order. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeNumber, screenRecipients } from '../../src/batches/recipients.js';
import { destinationRefusal } from '../../src/destinations/policy.js';

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

describe('screenRecipients with the destination policy', () => {
  it("skips a number the policy refuses with the policy's reason; a number no plan has is invalid_number", () => {
    const policy = {
      allowedCountries: ['US'],
      allowedNumberTypes: ['fixed_line' as const, 'fixed_line_or_mobile' as const, 'fictional' as const],
      dailyCallCap: null,
    };
    const { accepted, skipped } = screenRecipients(
      [
        { index: 0, to_number: '+1 (212) 555-1234' },
        { index: 1, to_number: '+1 900 555 0123', row: 3 },
        { index: 2, to_number: '+44 20 7946 0958' },
        { index: 3, to_number: '+14151230001' },
        { index: 4, to_number: '+15551230001' },
      ],
      [],
      (n) => destinationRefusal(policy, n),
    );
    assert.deepEqual(
      accepted.map((a) => a.number),
      ['+12125551234', '+15551230001'],
    );
    assert.deepEqual(
      skipped.map((s) => [s.index, s.reason]),
      [
        [1, 'destination_type_not_allowed'],
        [2, 'destination_country_not_allowed'],
        [3, 'invalid_number'],
      ],
    );
    assert.match(skipped[0].message, /^Row 3: \+19005550123 is a premium rate number \(premium_rate\)/);
    assert.match(skipped[2].message, /^Recipient 3: '\+14151230001' is not a valid phone number/);
  });
});
