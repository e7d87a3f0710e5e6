import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { extractData, judgeSuccess, statedValue } from '../../src/sandbox/voice/extraction.js';

const request = (data: Record<string, unknown>) => ({ type: 'object', properties: { summary: { type: 'string' }, data } });

describe('the sandbox analysis model: data from what the person said', () => {
  it('finds `<name> is|are|was|:|= <value>`, up to ; or the end of a sentence, the last statement winning', () => {
    assert.equal(statedValue('lead_score', ['My lead score is 7; thanks.']), '7');
    assert.equal(statedValue('lead_score', ['lead_score = 9']), '9');
    assert.equal(statedValue('booked_time', ['Booked time: 2026-12-01T10:00:00.5Z. Bye']), '2026-12-01T10:00:00.5Z');
    assert.equal(statedValue('topics', ['Topics are a, b and c!']), 'a, b and c');
    assert.equal(statedValue('name', ['Name was Ada.', 'Sorry, name is Grace Hopper']), 'Grace Hopper');
    assert.equal(statedValue('score', ['The highscore is 3.']), undefined, 'a name starts a word');
    assert.equal(statedValue('zip', ['Where is the zip?']), undefined);
  });

  it('converts by type, keeps what does not convert as said, and nulls what nobody stated where null is allowed', () => {
    const data = extractData(
      request({
        type: 'object',
        properties: {
          plan: { type: 'string', enum: ['Basic', 'Pro'] },
          other_plan: { type: 'string', enum: ['Basic', 'Pro'] },
          seats: { type: 'integer' },
          budget: { type: ['number', 'null'] },
          ratio: { type: 'number' },
          consent: { type: 'boolean' },
          newsletter: { type: 'boolean' },
          maybe: { type: 'boolean' },
          days: { type: 'array', items: { type: 'integer' } },
          address: { type: 'object', properties: { city: { type: 'string' }, street: { type: ['string', 'null'] } } },
          billing: { type: ['object', 'null'], properties: { iban: { type: 'string' } } },
          note: { type: ['string', 'null'] },
          nick: { type: 'string' },
        },
      }),
      [
        'Plan is pro. Other_plan is Enterprise. Seats: 3.5. Ratio = about -0.25 or so',
        'Consent: Agreed; newsletter is NO; maybe is perhaps. Days are 1, 2 and 30. City is Lisbon.',
      ],
    );
    assert.deepEqual(data, {
      plan: 'Pro',
      other_plan: 'Enterprise',
      seats: 3.5,
      budget: null,
      ratio: -0.25,
      consent: true,
      newsletter: false,
      maybe: 'perhaps',
      days: [1, 2, 30],
      address: { city: 'Lisbon', street: null },
      billing: null,
      note: null,
    });
  });

  it('follows $ref within the request schema', () => {
    const schema = {
      type: 'object',
      properties: {
        data: {
          type: 'object',
          properties: { home: { $ref: '#/properties/data/$defs/place' } },
          $defs: { place: { type: 'object', properties: { city: { type: 'string' } } } },
        },
      },
    };
    assert.deepEqual(extractData(schema, ['City is Porto.']), { home: { city: 'Porto' } });
  });
});

describe('the sandbox analysis model: success from quoted phrases', () => {
  it('is met when every quoted phrase was said, else names the first one missing', () => {
    assert.deepEqual(judgeSuccess('The caller says "book" and "Thank You".', ['I want to book', 'thank you!'], false), {
      met: true,
      reason: 'The caller said "book" and "Thank You".',
    });
    assert.deepEqual(judgeSuccess('Says "book" and "card number".', ['I want to book'], true), { met: false, reason: 'The caller did not say "card number".' });
  });

  it('without a quoted phrase follows the goal', () => {
    assert.deepEqual(judgeSuccess('The caller is happy.', [], true), { met: true, reason: "The criteria quote no phrase; the agent's goal was met." });
    assert.deepEqual(judgeSuccess('The caller is happy.', [], false), { met: false, reason: "The criteria quote no phrase; the agent's goal was not met." });
  });
});
