/**
 * The carriers' part of the contract comes from openapi/carriers/ (scripts/carriers-contract.ts): the
 * committed regions are what those files give, and a carrier added there as one file of its own reaches
 * every place the contract names carriers (the Provider enum, call.completed's provider, the agent's
 * telephony and config fields, every agent example, the callback paths) with no other file edited.
 * Bad carrier files and bad regions are refused with the file named.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load } from 'js-yaml';
import { carriersModule, readCarriers, REGION_FILES, withRegions, writeRegions } from '../../scripts/carriers-contract.js';

const root = path.resolve(import.meta.dirname, '../..');
let tmp: string;

/** A copy of what the regions and the carriers module read, to add a carrier to. */
function copyContract(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'carriers-contract-'));
  for (const f of [...REGION_FILES, ...fs.readdirSync(path.join(root, 'openapi/carriers')).map((c) => `openapi/carriers/${c}`)]) {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.copyFileSync(path.join(root, f), path.join(dir, f));
  }
  for (const c of readCarriers(root)) {
    const f = `openapi/components/schemas/${c.config.schema}.yaml`;
    fs.copyFileSync(path.join(root, f), path.join(dir, f));
  }
  return dir;
}

const yamlOf = (dir: string, file: string) => load(fs.readFileSync(path.join(dir, file), 'utf8')) as Record<string, any>;

/** Every `telephony` object under `value` (the agent examples). */
function telephonies(value: unknown, out: Array<Record<string, unknown>> = []): Array<Record<string, unknown>> {
  if (!value || typeof value !== 'object') return out;
  for (const [k, v] of Object.entries(value)) {
    if (k === 'telephony' && v && typeof v === 'object' && 'provider_a' in v) out.push(v as Record<string, unknown>);
    else telephonies(v, out);
  }
  return out;
}

before(() => {
  tmp = copyContract();
});
after(() => {
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('the carriers part of the contract', () => {
  it('is, as committed, what openapi/carriers/ gives', () => {
    assert.deepEqual(writeRegions(root, true), []);
    assert.deepEqual(
      readCarriers(root).map((c) => c.provider),
      yamlOf(root, 'openapi/components/schemas/Provider.yaml').enum,
    );
  });

  it('takes a new carrier, one file of its own, into every region and the dashboard list', () => {
    fs.writeFileSync(
      path.join(tmp, 'openapi/carriers/zeta.yaml'),
      [
        'telephony:',
        '  schema: TelephonyProviderStatus',
        '  example: { configured: false, phone_number: null, inbound_enabled: false }',
        'config:',
        '  schema: ProviderBConfigInput',
        'callbacks:',
        "  /telephony/zeta/events: './paths/telephony-zeta.yaml#/zeta_events'",
        '',
      ].join('\n'),
    );
    assert.deepEqual(writeRegions(tmp, true).sort(), [...REGION_FILES].sort(), 'checking finds every region stale');
    assert.deepEqual(writeRegions(tmp, false).sort(), [...REGION_FILES].sort());
    assert.deepEqual(writeRegions(tmp, true), [], 'written once, the regions are fresh');

    const schemas = 'openapi/components/schemas';
    assert.deepEqual(yamlOf(tmp, `${schemas}/Provider.yaml`).enum, ['provider_a', 'provider_b', 'sip', 'zeta']);
    assert.deepEqual(yamlOf(tmp, `${schemas}/CallCompletedEvent.yaml`).properties.provider.enum, ['provider_a', 'provider_b', 'sip', 'zeta', 'web']);
    const telephony = yamlOf(tmp, `${schemas}/Agent.yaml`).properties.telephony;
    assert.deepEqual(telephony.required, ['provider_a', 'provider_b', 'sip', 'zeta']);
    assert.deepEqual(telephony.properties.zeta, { $ref: './TelephonyProviderStatus.yaml' });
    for (const request of ['AgentCreateRequest', 'AgentUpdateRequest']) {
      const props = yamlOf(tmp, `${schemas}/${request}.yaml`).properties;
      assert.deepEqual(props.zeta_config, { oneOf: [{ $ref: './ProviderBConfigInput.yaml' }, { type: 'null' }] }, request);
      // What was there stays, in its place.
      assert.deepEqual(Object.keys(props).slice(Object.keys(props).indexOf('provider_a_config'), Object.keys(props).indexOf('zeta_config') + 1), [
        'provider_a_config',
        'provider_b_config',
        'sip_config',
        'zeta_config',
      ]);
    }
    const examples = telephonies(yamlOf(tmp, 'openapi/paths/agents.yaml'));
    assert.ok(examples.length >= 4);
    for (const e of examples) {
      assert.deepEqual(e.zeta, { configured: false, phone_number: null, inbound_enabled: false });
      assert.equal(e.sip, null);
      assert.equal((e.provider_a as { configured: boolean }).configured, true, 'the carrier an example sets up is kept');
    }
    assert.deepEqual(yamlOf(tmp, 'openapi/openapi.yaml').paths['/telephony/zeta/events'], { $ref: './paths/telephony-zeta.yaml#/zeta_events' });

    const module = carriersModule(tmp, '');
    assert.match(module, /"provider": "zeta",\s+"config": "zeta_config",\s+"account": \[/);
    assert.match(module, /"provider": "sip",\s+"config": "sip_config",\s+"account": null/);
  });

  it('refuses a carrier file without its telephony or config, naming it, and leaves the contract as it was', () => {
    const dir = copyContract();
    try {
      fs.writeFileSync(path.join(dir, 'openapi/carriers/broken.yaml'), 'config:\n  schema: ProviderAConfigInput\n');
      const before = fs.readFileSync(path.join(dir, 'openapi/components/schemas/Provider.yaml'), 'utf8');
      assert.throws(() => writeRegions(dir, false), /openapi\/carriers\/broken\.yaml: telephony\.schema, telephony\.example and config\.schema are required/);
      assert.equal(fs.readFileSync(path.join(dir, 'openapi/components/schemas/Provider.yaml'), 'utf8'), before);
      fs.rmSync(path.join(dir, 'openapi/carriers/broken.yaml'));
      fs.writeFileSync(path.join(dir, 'openapi/carriers/Bad-Id.yaml'), 'telephony: { schema: X, example: null }\nconfig: { schema: Y }\n');
      assert.throws(() => readCarriers(dir), /Bad-Id\.yaml: a provider id is lower-case letters, digits and _/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a region that does not close, opens inside another, is of an unknown kind or excepts an unknown carrier', () => {
    const carriers = readCarriers(root);
    assert.throws(() => withRegions('a:\n  # carriers:begin provider-enum\n  enum: []\n', carriers, 'x.yaml'), /x\.yaml:2: the region has no "# carriers:end"/);
    assert.throws(
      () => withRegions('# carriers:begin provider-enum\n# carriers:begin provider-enum\n# carriers:end\n', carriers, 'x.yaml'),
      /x\.yaml:1: a region opens inside another/,
    );
    assert.throws(() => withRegions('# carriers:begin colours\n# carriers:end\n', carriers, 'x.yaml'), /x\.yaml:1: unknown carriers region colours/);
    assert.throws(() => withRegions('# carriers:begin example-telephony except nobody\n# carriers:end\n', carriers, 'x.yaml'), /x\.yaml:1: no carrier nobody/);
  });
});
