/**
 * Classifying numbers with libphonenumber's full metadata (src/destinations/numbers.ts) and the policy
 * rules over them (policy.ts): the numbers of issue 21 (premium rate, satellite, not a number), the
 * kinds the service adds (satellite, international network, fictional), the sandbox's numbers, and
 * that classification costs a parse, not a metadata load.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { classifyNumber, isDialableCountry, NUMBER_KINDS } from '../../src/destinations/numbers.js';
import { callerIdRefusal, destinationRefusal, type DestinationPolicy } from '../../src/destinations/policy.js';
import { openapiDocument } from '../../src/contract/documents.js';

const kindOf = (n: string) => {
  const c = classifyNumber(n);
  return c.valid ? c.kind : 'invalid';
};

/** The default policy as migration 016's column defaults set it (the integration tests read it back from the API). */
const DEFAULT: DestinationPolicy = {
  allowedCountries: null,
  allowedNumberTypes: ['fixed_line', 'mobile', 'fixed_line_or_mobile', 'toll_free', 'voip', 'uan', 'fictional'],
  dailyCallCap: 1000,
};

describe('classifyNumber', () => {
  it('tells the kinds of the issue apart: premium rate, satellite, not a number', () => {
    assert.equal(kindOf('+19005550123'), 'premium_rate');
    assert.equal(kindOf('+881612345678'), 'satellite');
    assert.equal(kindOf('+870772123456'), 'satellite');
    assert.equal(kindOf('+12'), 'invalid');
    assert.equal(kindOf('+8823456789012'), 'international_network');
    assert.equal(kindOf('+883510012345'), 'international_network');
  });

  it('uses the full metadata: the types of numbers beyond North America', () => {
    assert.deepEqual(classifyNumber('+442079460958'), { valid: true, e164: '+442079460958', kind: 'fixed_line', country: 'GB' });
    assert.equal(kindOf('+449012345678'), 'premium_rate');
    assert.equal(kindOf('+447012345678'), 'personal_number');
    assert.equal(kindOf('+33612345678'), 'mobile');
    assert.equal(kindOf('+33812345678'), 'premium_rate');
    assert.equal(kindOf('+80812345678'), 'shared_cost');
    assert.equal(kindOf('+979123456789'), 'premium_rate');
    assert.equal(kindOf('+18005551212'), 'toll_free');
    const jamaica = classifyNumber('+18765550123');
    assert.equal(jamaica.valid && jamaica.country, 'JM');
  });

  it('refuses what no numbering plan has, even when it matches the E.164 pattern', () => {
    for (const n of ['+14151230001', '+1415123000', '+88213', '+999123456', '+10000000000', '+1 415 555 0123', '14155550123', ''])
      assert.equal(kindOf(n), 'invalid', n);
  });

  it("calls the North American numbers for fiction and tests fictional, but keeps a 555-01xx premium-rate or toll-free number's type", () => {
    for (const n of ['+14155550123', '+12125550199', '+16135550100', '+15551230001', '+15559990000', '+15550001234']) assert.equal(kindOf(n), 'fictional', n);
    assert.equal(kindOf('+19005550150'), 'premium_rate');
    assert.equal(kindOf('+18005550100'), 'toll_free');
    // The sandbox's outcome numbers: any prefix with the last four digits; with a real exchange they are ordinary numbers.
    for (const n of ['+14155550001', '+14155550002', '+14155550003', '+14155550004']) assert.equal(kindOf(n), 'fixed_line_or_mobile', n);
  });

  it('every kind it gives is one the contract lists, and countries are checked against the metadata', () => {
    const contract = (openapiDocument() as { components: { schemas: Record<string, { enum?: string[] }> } }).components.schemas.DestinationNumberType;
    assert.deepEqual([...NUMBER_KINDS], contract.enum);
    assert.ok(isDialableCountry('US') && isDialableCountry('GB'));
    assert.ok(!isDialableCountry('XX') && !isDialableCountry('ZZ'));
  });

  it('classifies thousands of numbers quickly (metadata loaded once, with the module)', () => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < 10_000; i++) classifyNumber(`+1415${200 + (i % 700)}${String(i).padStart(4, '0')}`);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // Not a timing assertion on the work itself: a metadata load per call would take minutes.
    assert.ok(ms < 30_000, `${ms} ms`);
  });
});

describe('destinationRefusal (default policy)', () => {
  it('refuses premium-rate, shared-cost, satellite, international-network, personal, pager and unknown numbers with their code', () => {
    const refused = ['+19005550123', '+80812345678', '+881612345678', '+8823456789012', '+447012345678', '+449012345678'];
    for (const n of refused) assert.equal(destinationRefusal(DEFAULT, n)?.code, 'destination_type_not_allowed', n);
    assert.match(destinationRefusal(DEFAULT, '+19005550123')!.message, /premium rate number \(premium_rate\)/);
    assert.equal(destinationRefusal(DEFAULT, '+12')?.code, 'invalid_phone_number');
  });

  it('allows ordinary, toll-free and fictional numbers anywhere', () => {
    for (const n of ['+442079460958', '+33612345678', '+18005551212', '+14155550123', '+15551230001', '+14155550002'])
      assert.equal(destinationRefusal(DEFAULT, n), null, n);
  });

  it('applies the allowed countries; numbers of no country pass only when every country is allowed; fictional ones always', () => {
    const usOnly: DestinationPolicy = { ...DEFAULT, allowedCountries: ['US'], allowedNumberTypes: [...DEFAULT.allowedNumberTypes, 'satellite'] };
    assert.equal(destinationRefusal(usOnly, '+12125551234'), null);
    const gb = destinationRefusal(usOnly, '+442079460958');
    assert.equal(gb?.code, 'destination_country_not_allowed');
    assert.match(gb!.message, /a number in GB; .* allows calls to US only/);
    assert.equal(destinationRefusal(usOnly, '+881612345678')?.code, 'destination_country_not_allowed');
    assert.equal(destinationRefusal({ ...usOnly, allowedCountries: null }, '+881612345678'), null);
    assert.equal(destinationRefusal(usOnly, '+15551230001'), null);
    assert.equal(destinationRefusal({ ...usOnly, allowedCountries: [] }, '+12125551234')?.code, 'destination_country_not_allowed');
  });

  it('lets a workspace allow a kind the default refuses', () => {
    assert.equal(destinationRefusal({ ...DEFAULT, allowedNumberTypes: ['premium_rate'] }, '+19005550123'), null);
    assert.equal(destinationRefusal({ ...DEFAULT, allowedNumberTypes: ['premium_rate'] }, '+14155552671')?.code, 'destination_type_not_allowed');
  });
});

describe('callerIdRefusal', () => {
  it('takes numbers a person can call back at an ordinary rate, whatever the policy', () => {
    for (const n of ['+14155550100', '+442079460958', '+18005551212', '+15559990000']) assert.equal(callerIdRefusal(n), null, n);
    assert.equal(callerIdRefusal('+19005550123')?.code, 'caller_id_not_allowed');
    assert.equal(callerIdRefusal('+881612345678')?.code, 'caller_id_not_allowed');
    assert.equal(callerIdRefusal('+12')?.code, 'invalid_phone_number');
  });
});
