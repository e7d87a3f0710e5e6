/** Bounded placeholder filling: the filled length known before the text is built, each field held to its cap, the variable blamed. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  fillOverflow,
  filledFieldCaps,
  fillPlaceholders,
  missingMessage,
  missingVariable,
  overflowMessage,
  Template,
} from '../../src/contract/placeholders.js';

describe('Template', () => {
  it('knows the filled length without filling; a name without a value takes its own default, else nothing (never its braces)', () => {
    const template = new Template('Hi {{ name }}, {{count}} items, {{missing}}, {{name}}, {{who | there }}, {{what|}}.');
    const values = { name: 'Ada', count: 3, unused: 'x'.repeat(500) };
    const filled = template.fill(values, 1000);
    assert.equal(filled, 'Hi Ada, 3 items, , Ada, there, .');
    assert.equal(template.filledLength(values), filled.length);
    assert.equal(template.fill({}, 1000), 'Hi ,  items, , , there, .');
    assert.equal(template.filledLength({}), 'Hi ,  items, , , there, .'.length);
    assert.equal(template.fill({ who: 'you', what: 7 }, 1000), 'Hi ,  items, , , you, 7.');
  });

  it('names the first placeholder with no value and no default of its own', () => {
    const template = new Template('Hi {{name|there}}, {{day}} at {{time}}; {{name}}.');
    assert.equal(template.missing({}), 'name', 'one of its placeholders has no default');
    assert.equal(template.missing({ name: 'Ada' }), 'day');
    assert.equal(template.missing({ name: 'Ada', day: 'Monday', time: 10 }), null);
    assert.equal(new Template('Hi {{name|there}} {{x|}}').missing({}), null);
    assert.equal(new Template('Hi {name} {{ }} {{a b}}').missing({}), null, 'not placeholders');
  });

  it('leaves text that only looks like placeholders as written', () => {
    const text = `${'{{a|'.repeat(20_000)}${'{{ '.repeat(20_000)}${'{{a'.repeat(20_000)}${' '.repeat(20_000)}`;
    const template = new Template(text);
    assert.equal(template.missing({}), null);
    assert.equal(template.fill({}, 1_000_000), text);
  });

  it('never builds a fill past its cap: 10,000 placeholders of a 2,000-character value give the cap, not 20 MB', () => {
    const text = `Notes: ${'{{a}}'.repeat(10_000)}`;
    const template = new Template(text);
    const values = { a: 'x'.repeat(2000) };
    assert.equal(template.filledLength(values), 7 + 10_000 * 2000);
    const filled = template.fill(values, 50_000);
    assert.equal(filled.length, 50_000);
    assert.ok(filled.startsWith('Notes: xxx'));
    assert.equal(fillPlaceholders(text, values, 50_000), filled);
  });

  it('names the variable taking the most room among those asked about', () => {
    const template = new Template('{{a}}{{a}}{{a}} {{b}} {{c}}');
    const values = { a: 'aa', b: 'b'.repeat(10), c: 'c'.repeat(5) };
    assert.equal(template.largest(values, ['a', 'b', 'c']), 'b');
    assert.equal(template.largest(values, ['a', 'c']), 'a');
    assert.equal(template.largest(values, ['d']), null);
  });
});

describe('fillOverflow', () => {
  const caps = filledFieldCaps();

  it("reads each field's cap from the contract", () => {
    assert.deepEqual(caps, { instruction: 50_000, first_message: 2000, 'voicemail_config.message': 2000 });
  });

  it('is null at the cap and names the field and the variable one character past it', () => {
    const templates = { instruction: new Template('{{notes}}'.repeat(25)), first_message: new Template('Hi {{name}}.') };
    const notes = 'n'.repeat(2000);
    assert.equal(fillOverflow(templates, {}, { notes, name: 'a'.repeat(1996) }), null);
    const over = fillOverflow(templates, { name: 'there' }, { notes, name: 'a'.repeat(1997) });
    assert.deepEqual(over, { field: 'first_message', variable: 'name', length: 2001, max: 2000 });
    assert.match(overflowMessage(over!), /'name'.*first_message.*2001.*2000/);
  });

  it("blames the conversation's own variable over the agent's defaults, and a default when no own variable appears", () => {
    const templates = { instruction: new Template(`${'{{big}}'.repeat(30)}{{small}}`) };
    assert.equal(fillOverflow(templates, { big: 'b'.repeat(2000) }, { small: 's' })?.variable, 'small');
    assert.equal(fillOverflow(templates, { big: 'b'.repeat(2000) }, { other: 'o' })?.variable, 'big');
    assert.equal(fillOverflow({ instruction: null }, {}, {}), null);
  });
});

describe('missingVariable', () => {
  it("is null when the call's variables or the agent's defaults give every required placeholder; else names it and its field", () => {
    const templates = { instruction: new Template('Remind {{name}}.'), first_message: new Template('Hi {{name}}, {{day|soon}} at {{time}}.') };
    assert.deepEqual(missingVariable(templates, {}, {}), { field: 'instruction', variable: 'name' });
    assert.deepEqual(missingVariable(templates, { name: 'there' }, {}), { field: 'first_message', variable: 'time' });
    assert.equal(missingVariable(templates, { name: 'there' }, { time: '10' }), null);
    assert.equal(missingVariable({ first_message: null }, {}, {}), null);
    assert.match(
      missingMessage({ field: 'first_message', variable: 'time' }),
      /'time' has no value: the first_message uses \{\{time\}\}.*\{\{time\|\.\.\.\}\}/,
    );
  });
});
