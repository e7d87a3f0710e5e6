/**
 * The carriers' part of the contract, derived from one place: `openapi/carriers/<provider>.yaml`, one
 * file per carrier (the file name is the provider id; file-name order is the order the API lists them).
 * `npm run generate` writes every region of the contract marked
 *
 *     # carriers:begin <kind> [<argument> ...]
 *     ...
 *     # carriers:end
 *
 * from those files (the text between the markers is replaced; the markers stay), so adding a carrier
 * touches none of these files by hand. `npm run generate -- --check` fails when a region differs from
 * what the carrier files give. The kinds:
 *  - `provider-enum [<value> ...]`: `enum: [<every provider>, <value> ...]` (the `Provider` enum;
 *    `call.completed`'s provider lists `web` after them)
 *  - `agent-telephony`: `required` and `properties` of `Agent.telephony`, one per carrier
 *  - `agent-config`: the `<provider>_config` properties of the agent's create and update requests
 *  - `example-telephony [except <provider> ...]`: the carriers an agent example shows as not set up
 *    (the ones it sets up are written above the region by hand)
 *  - `callback-paths`: the carriers' callback paths in openapi.yaml
 * It also gives generated/carriers.ts: each carrier and its agent account's fields, for the dashboard.
 */
import fs from 'node:fs';
import path from 'node:path';
import { load } from 'js-yaml';

interface CarrierContract {
  provider: string;
  telephony: { schema: string; nullable?: boolean; description?: string; example: unknown };
  config: { schema: string; description?: string };
  callbacks: Record<string, string>;
}

const BEGIN = /^( *)# carriers:begin ([a-z-]+)((?: [a-z_]+)*) *$/;
const END = /^ *# carriers:end *$/;

/** The files holding regions, relative to the repository root. */
export const REGION_FILES = [
  'openapi/openapi.yaml',
  'openapi/paths/agents.yaml',
  'openapi/components/schemas/Provider.yaml',
  'openapi/components/schemas/CallCompletedEvent.yaml',
  'openapi/components/schemas/Agent.yaml',
  'openapi/components/schemas/AgentCreateRequest.yaml',
  'openapi/components/schemas/AgentUpdateRequest.yaml',
];

export function readCarriers(root: string): CarrierContract[] {
  const dir = path.join(root, 'openapi/carriers');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => {
      const provider = f.slice(0, -'.yaml'.length);
      if (!/^[a-z][a-z0-9_]*$/.test(provider)) throw new Error(`openapi/carriers/${f}: a provider id is lower-case letters, digits and _`);
      const c = load(fs.readFileSync(path.join(dir, f), 'utf8')) as Omit<CarrierContract, 'provider'>;
      if (!c?.telephony?.schema || !c.config?.schema || !('example' in c.telephony)) {
        throw new Error(`openapi/carriers/${f}: telephony.schema, telephony.example and config.schema are required`);
      }
      return { provider, ...c, callbacks: c.callbacks ?? {} };
    });
}

/** A value in YAML's flow style, as the examples write it. */
function flow(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'string') return `'${value.replace(/'/g, "''")}'`;
  if (typeof value !== 'object') return String(value);
  if (Array.isArray(value)) return `[${value.map(flow).join(', ')}]`;
  return `{ ${Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${flow(v)}`)
    .join(', ')} }`;
}

/** `name:` with a `$ref` to a schema, or a `oneOf` of it and null, and a description. */
function property(name: string, schema: string, nullable: boolean, description?: string): string[] {
  const lines = nullable ? [`${name}:`, '  oneOf:', `    - $ref: ./${schema}.yaml`, "    - type: 'null'"] : [`${name}: { $ref: ./${schema}.yaml }`];
  if (description) {
    const text = description.trimEnd().split('\n');
    if (!nullable) throw new Error(`${name}: a description needs the oneOf form`);
    lines.push(...(text.length === 1 ? [`  description: ${text[0]}`] : ['  description: |', ...text.map((l) => `    ${l}`)]));
  }
  return lines;
}

function region(kind: string, args: string[], carriers: CarrierContract[], where: string): string[] {
  const ids = carriers.map((c) => c.provider);
  switch (kind) {
    case 'provider-enum':
      return [`enum: [${[...ids, ...args].join(', ')}]`];
    case 'agent-telephony':
      return [
        `required: [${ids.join(', ')}]`,
        'properties:',
        ...carriers.flatMap((c) => property(c.provider, c.telephony.schema, c.telephony.nullable ?? false, c.telephony.description).map((l) => `  ${l}`)),
      ];
    case 'agent-config':
      return carriers.flatMap((c) => property(`${c.provider}_config`, c.config.schema, true, c.config.description));
    case 'example-telephony': {
      if (args[0] !== undefined && args[0] !== 'except') throw new Error(`${where}: example-telephony takes "except <provider> ..."`);
      const shown = args.slice(1);
      for (const p of shown) if (!ids.includes(p)) throw new Error(`${where}: no carrier ${p}`);
      return carriers.filter((c) => !shown.includes(c.provider)).map((c) => `${c.provider}: ${flow(c.telephony.example)}`);
    }
    case 'callback-paths':
      return carriers.flatMap((c) => Object.entries(c.callbacks).map(([p, ref]) => `${p}: { $ref: '${ref}' }`));
    default:
      throw new Error(`${where}: unknown carriers region ${kind}`);
  }
}

/** `text` with every region rewritten from `carriers`. */
export function withRegions(text: string, carriers: CarrierContract[], file: string): string {
  const lines = text.split('\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    out.push(line);
    const begin = BEGIN.exec(line);
    if (!begin) continue;
    const where = `${file}:${i + 1}`;
    let end = i + 1;
    while (end < lines.length && !END.test(lines[end]!)) {
      if (BEGIN.test(lines[end]!)) throw new Error(`${where}: a region opens inside another`);
      end++;
    }
    if (end === lines.length) throw new Error(`${where}: the region has no "# carriers:end"`);
    const [, indent, kind, rest] = begin;
    out.push(...region(kind!, rest!.trim().split(' ').filter(Boolean), carriers, where).map((l) => `${indent}${l}`));
    out.push(lines[end]!);
    i = end;
  }
  return out.join('\n');
}

/**
 * Rewrites the regions (`check`: only compares them). Answers the files whose regions were, or (checking)
 * are, not what the carrier files give.
 */
export function writeRegions(root: string, check: boolean): string[] {
  const carriers = readCarriers(root);
  const changed: string[] = [];
  for (const file of REGION_FILES) {
    const full = path.join(root, file);
    const text = fs.readFileSync(full, 'utf8');
    if (!text.includes('# carriers:begin')) throw new Error(`${file} has no carriers region`);
    const next = withRegions(text, carriers, file);
    if (next === text) continue;
    changed.push(file);
    if (!check) fs.writeFileSync(full, next);
  }
  return changed;
}

/** generated/carriers.ts: each carrier, and for one whose agent account is `TelephonyProviderStatus`, its input's fields. */
export function carriersModule(root: string, header: string): string {
  const entries = readCarriers(root).map((c) => {
    const input = load(fs.readFileSync(path.join(root, `openapi/components/schemas/${c.config.schema}.yaml`), 'utf8')) as {
      properties: Record<string, { writeOnly?: boolean }>;
    };
    const account =
      c.telephony.schema === 'TelephonyProviderStatus' ? Object.entries(input.properties).map(([name, p]) => ({ name, secret: p.writeOnly === true })) : null;
    return { provider: c.provider, config: `${c.provider}_config`, account };
  });
  return (
    `${header}\n` +
    `/**\n * Every carrier the contract names (openapi/carriers/), in the order the API lists them: its agent config\n` +
    ` * field, and for a carrier whose account is the agent's own (\`TelephonyProviderStatus\`: credentials and a\n` +
    ` * number), that account's fields, write-only ones \`secret\`.\n */\n` +
    `export const carriers = ${JSON.stringify(entries, null, 2)} as const;\n\n` +
    `export type CarrierId = (typeof carriers)[number]['provider'];\n`
  );
}
