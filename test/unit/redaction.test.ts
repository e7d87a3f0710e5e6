/**
 * The redaction module (src/redaction/): each built-in kind found where it is and left alone where it
 * only looks like it (a 16-digit number failing the Luhn check, an SSN of a never-issued area, an NI
 * number with a forbidden prefix, a wrong check letter), custom patterns on re2js, overlaps, the
 * content shapes (transcript entries, tool calls, analysis), the checks on write, and the bounds: a
 * hostile text or pattern finishes at once, a text beyond the work budget is withheld whole.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Redactor, WORK_MAX } from '../../src/redaction/redactor.js';
import { checkRedactionSetting, type RedactionSetting } from '../../src/redaction/setting.js';
import type { Entity } from '../../src/redaction/recognisers.js';
import { ApiError } from '../../src/errors/api-error.js';
import { RE2JS } from 're2js';

const setting = (entities: Entity[], more: Partial<RedactionSetting> = {}): RedactionSetting => ({
  entities,
  custom_patterns: [],
  targets: ['transcript'],
  phone_country: null,
  ...more,
});
const redact = (entities: Entity[], text: string, more: Partial<RedactionSetting> = {}, personNumber: string | null = null) =>
  new Redactor(setting(entities, more), personNumber).text(text);

describe('redaction: built-in kinds', () => {
  it('phone numbers by libphonenumber-js: international always, national by the setting or the person’s country', () => {
    assert.equal(redact(['phone_number'], 'call me on +44 20 7946 0958 today'), 'call me on [REDACTED:phone_number] today');
    assert.equal(redact(['phone_number'], 'my number is 020 7946 0958'), 'my number is 020 7946 0958');
    assert.equal(redact(['phone_number'], 'my number is 020 7946 0958', { phone_country: 'GB' }), 'my number is [REDACTED:phone_number]');
    assert.equal(redact(['phone_number'], 'it is 415-867-5309.', {}, '+14158675309'), 'it is [REDACTED:phone_number].');
    assert.equal(redact(['phone_number'], 'room 12, floor 3, 2024'), 'room 12, floor 3, 2024');
  });

  it('emails', () => {
    assert.equal(redact(['email'], 'write to ada.l+x@mail.example.co.uk, thanks'), 'write to [REDACTED:email], thanks');
    assert.equal(redact(['email'], 'an @ sign and user@localhost are not emails'), 'an @ sign and user@localhost are not emails');
  });

  it('card numbers pass the Luhn check; a 16-digit number failing it is left alone', () => {
    assert.equal(redact(['card_number'], 'card 4111 1111 1111 1111 exp 12/29'), 'card [REDACTED:card_number] exp 12/29');
    assert.equal(redact(['card_number'], '5500-0000-0000-0004'), '[REDACTED:card_number]');
    assert.equal(redact(['card_number'], '4111111111111111'), '[REDACTED:card_number]');
    assert.equal(redact(['card_number'], 'ref 4111 1111 1111 1112'), 'ref 4111 1111 1111 1112');
    assert.equal(redact(['card_number'], 'order 41111111111111110000'), 'order 41111111111111110000');
  });

  it('US SSNs, not the never-issued ones', () => {
    assert.equal(redact(['us_ssn'], 'ssn 123-45-6789.'), 'ssn [REDACTED:us_ssn].');
    assert.equal(redact(['us_ssn'], 'ssn 123 45 6789'), 'ssn [REDACTED:us_ssn]');
    for (const miss of ['666-12-3456', '000-12-3456', '912-34-5678', '123-00-4567', '123-45-0000', '123-45 6789']) assert.equal(redact(['us_ssn'], miss), miss);
  });

  it('UK NI numbers with HMRC’s prefixes and suffixes', () => {
    assert.equal(redact(['uk_ni_number'], 'NI AB 12 34 56 C ok'), 'NI [REDACTED:uk_ni_number] ok');
    assert.equal(redact(['uk_ni_number'], 'ab123456c'), '[REDACTED:uk_ni_number]');
    for (const miss of ['QQ123456C', 'GB123456A', 'AO123456A', 'AB123456E']) assert.equal(redact(['uk_ni_number'], miss), miss);
  });

  it('Canadian SINs pass the Luhn check', () => {
    assert.equal(redact(['ca_sin'], 'SIN 130 692 544'), 'SIN [REDACTED:ca_sin]');
    assert.equal(redact(['ca_sin'], 'SIN 130 692 545'), 'SIN 130 692 545');
    assert.equal(redact(['ca_sin'], 'SIN 830 692 540'), 'SIN 830 692 540');
  });

  it('Dutch BSNs pass the eleven test', () => {
    assert.equal(redact(['nl_bsn'], 'BSN 111222333'), 'BSN [REDACTED:nl_bsn]');
    assert.equal(redact(['nl_bsn'], 'BSN 111222334'), 'BSN 111222334');
  });

  it('Spanish DNI and NIE with their check letter', () => {
    assert.equal(redact(['es_dni'], 'DNI 12345678Z'), 'DNI [REDACTED:es_dni]');
    assert.equal(redact(['es_dni'], 'NIE X-1234567-L'), 'NIE [REDACTED:es_dni]');
    assert.equal(redact(['es_dni'], 'DNI 12345678A'), 'DNI 12345678A');
  });

  it('only the kinds the setting lists', () => {
    assert.equal(redact(['email'], 'card 4111 1111 1111 1111'), 'card 4111 1111 1111 1111');
  });
});

describe('redaction: custom patterns, overlaps and content', () => {
  it('custom patterns become their name; overlaps go to the span starting first, then the longest', () => {
    const r = new Redactor(
      setting(['card_number'], {
        custom_patterns: [
          { name: 'order_id', pattern: 'ORD-[0-9]{6}' },
          { name: 'digits', pattern: '[0-9]{4}' },
        ],
      }),
    );
    assert.equal(r.text('ORD-123456 and 4111 1111 1111 1111'), '[REDACTED:order_id] and [REDACTED:card_number]');
    assert.equal(r.text('(?i) ord-123456'), '(?i) ord-[REDACTED:digits]56');
  });

  it('redacts transcript entries (keys too), tool calls and analysis, keeping everything else', () => {
    const r = new Redactor(setting(['card_number', 'email']));
    assert.deepEqual(r.turn({ role: 'user', text: '4111111111111111#', dtmf: '4111111111111111#', timestamp: 1 }), {
      role: 'user',
      text: '[REDACTED:card_number]#',
      dtmf: '[REDACTED:card_number]#',
      timestamp: 1,
    });
    assert.deepEqual(r.toolCall({ name: 'pay', arguments: { card: '4111 1111 1111 1111', n: 2 }, result: ['a@b.example'], error: null, ok: true }), {
      name: 'pay',
      arguments: { card: '[REDACTED:card_number]', n: 2 },
      result: ['[REDACTED:email]'],
      error: null,
      ok: true,
    });
    assert.deepEqual(
      r.analysis({
        summary: 'Paid with 4111 1111 1111 1111.',
        unanswered_questions: ['mail a@b.example?'],
        data: { email: 'a@b.example' },
        success: { met: true, reason: 'a@b.example' },
        sentiment: 'positive',
      }),
      {
        summary: 'Paid with [REDACTED:card_number].',
        unanswered_questions: ['mail [REDACTED:email]?'],
        data: { email: '[REDACTED:email]' },
        success: { met: true, reason: '[REDACTED:email]' },
        sentiment: 'positive',
      },
    );
  });
});

describe('redaction: bounds', () => {
  it('built-in recognisers take a hostile text in linear time', () => {
    const r = new Redactor(setting(['phone_number', 'email', 'card_number', 'us_ssn', 'uk_ni_number', 'ca_sin', 'nl_bsn', 'es_dni']));
    for (const hostile of ['a'.repeat(50_000) + '@', 'a@' + 'b.'.repeat(25_000), '1 '.repeat(25_000), '1-'.repeat(25_000) + 'x', 'AB 1'.repeat(12_000)]) {
      const started = performance.now();
      r.text(hostile);
      // A generous bound on a shared machine: a backtracking blow-up on 50,000 characters takes minutes.
      assert.ok(performance.now() - started < 5_000, `took ${performance.now() - started} ms`);
    }
  });

  it('a hostile custom pattern is bounded: refused past its size, and a text past the work budget is withheld whole', () => {
    assert.throws(
      () => checkRedactionSetting({ targets: ['transcript'], custom_patterns: [{ name: 'x', pattern: '[a-z]{1,1000}[0-9]{1,1000}' }] }),
      (e: ApiError) => {
        assert.equal(e.code, 'redaction_pattern_too_complex');
        assert.equal(e.param, 'redaction.custom_patterns[0].pattern');
        return true;
      },
    );
    const heavy = [
      { name: 'heavy', pattern: '[a-z]{1,240}[0-9]{1,240}' },
      { name: 'heavier', pattern: '[A-Z]{1,240}[0-9]{1,240}' },
    ];
    const stored = checkRedactionSetting({ targets: ['transcript'], custom_patterns: heavy })!;
    const r = new Redactor(stored);
    const size = heavy.reduce((n, p) => n + RE2JS.compile(p.pattern).programSize(), 0);
    assert.ok(size > 1500);
    const longest = Math.floor(WORK_MAX / size);
    const started = performance.now();
    assert.equal(r.text('a'.repeat(longest)), 'a'.repeat(longest));
    assert.ok(performance.now() - started < 5_000);
    assert.equal(r.text('a'.repeat(longest + 1)), '[REDACTED:unchecked]');
    assert.equal(r.text('abc123'), '[REDACTED:heavy]');
  });

  it('checks settings on write: RE2 syntax, empty matches, names, country', () => {
    const code = (input: Parameters<typeof checkRedactionSetting>[0]) => {
      try {
        checkRedactionSetting(input);
        return null;
      } catch (e) {
        return [(e as ApiError).code, (e as ApiError).param];
      }
    };
    assert.deepEqual(code({ targets: ['webhooks'], custom_patterns: [{ name: 'a', pattern: '(?=x)y' }] }), [
      'invalid_redaction_pattern',
      'redaction.custom_patterns[0].pattern',
    ]);
    assert.deepEqual(code({ targets: ['webhooks'], custom_patterns: [{ name: 'a', pattern: '(a)\\1' }] }), [
      'invalid_redaction_pattern',
      'redaction.custom_patterns[0].pattern',
    ]);
    assert.deepEqual(code({ targets: ['webhooks'], custom_patterns: [{ name: 'a', pattern: 'x*' }] }), [
      'invalid_redaction_pattern',
      'redaction.custom_patterns[0].pattern',
    ]);
    assert.deepEqual(
      code({
        targets: ['webhooks'],
        custom_patterns: [
          { name: 'a', pattern: 'x' },
          { name: 'a', pattern: 'y' },
        ],
      }),
      ['redaction_pattern_name_taken', 'redaction.custom_patterns[1].name'],
    );
    assert.deepEqual(code({ targets: ['webhooks'], phone_country: 'XX' }), ['invalid_redaction_country', 'redaction.phone_country']);
    assert.deepEqual(checkRedactionSetting({ targets: ['webhooks'] }), { entities: [], custom_patterns: [], targets: ['webhooks'], phone_country: null });
  });
});
