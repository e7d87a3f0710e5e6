/**
 * The contract as `npm run generate` bundled it (generated/openapi-internal.json, its public part
 * generated/openapi.json, generated/asyncapi.json): the one module that reads the documents, and the JSON Schema validator both are checked with. Outside
 * src/http/ so domains (webhook payloads, tool schemas) use it without depending on the HTTP layer.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ValidateFunction, type Options as AjvOptions } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Json = Record<string, unknown>;

/** The project's root: the nearest directory above this module with package.json (src/ under tsx, dist/src/ when compiled). */
function projectRoot(): string {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error('package.json not found above the service');
  }
}

export const rootDir = projectRoot();
export const generatedDir = path.join(rootDir, 'generated');

/** Ajv for OpenAPI 3.1 and AsyncAPI 3.0 schemas (draft 2020-12), with the formats both use. */
export function makeAjv(opts: AjvOptions = {}): Ajv2020 {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true, ...opts });
  addFormats.default(ajv);
  for (const f of ['int32', 'int64', 'float', 'double', 'byte', 'binary', 'password']) ajv.addFormat(f, true);
  return ajv;
}

/** Keys whose values are data, not schemas: never closed. */
const DATA_KEYS = new Set(['example', 'examples', 'default', 'const', 'enum']);
const COMPOSITIONS = ['allOf', 'anyOf', 'oneOf', 'if'];

/**
 * A copy of a document in which every object schema that lists `properties` and says nothing about
 * other properties refuses them: `additionalProperties: false`, or `unevaluatedProperties: false`
 * beside a composition. The contract leaves response schemas open, so clients built from it tolerate
 * fields added later; the service's own checks of what it sends (every response in tests, every
 * webhook payload before it is recorded) validate against this closed copy, so a field the contract
 * does not list (a leaked credential, a misspelt name) still fails them. Request schemas declare
 * `additionalProperties` themselves and are unchanged. `skip` leaves a subtree as it is.
 */
export function withClosedObjects(doc: Json, skip: (path: string[]) => boolean = () => false): Json {
  const close = (node: unknown, at: string[]): unknown => {
    if (Array.isArray(node)) return node.map((n, i) => close(n, [...at, String(i)]));
    if (!node || typeof node !== 'object' || skip(at)) return node;
    const out: Json = {};
    for (const [k, v] of Object.entries(node as Json)) out[k] = DATA_KEYS.has(k) || k.startsWith('x-') ? v : close(v, [...at, k]);
    const props = out.properties;
    const open = ['additionalProperties', 'unevaluatedProperties', 'patternProperties'].some((k) => k in out);
    if (props && typeof props === 'object' && !Array.isArray(props) && !open) {
      if (COMPOSITIONS.some((k) => k in out)) out.unevaluatedProperties = false;
      else out.additionalProperties = false;
    }
    return out;
  };
  return close(doc, []) as Json;
}

const documents = new Map<string, Json>();
function read(file: 'openapi.json' | 'openapi-internal.json' | 'asyncapi.json'): Json {
  let doc = documents.get(file);
  if (!doc) {
    doc = JSON.parse(readFileSync(path.join(generatedDir, file), 'utf8')) as Json;
    documents.set(file, doc);
  }
  return doc;
}

/** The public OpenAPI document served at /openapi.json: what API clients may call. */
export const openapiDocument = (): Json => read('openapi.json');
/** The whole OpenAPI document (internal routes and extensions included): what the service routes and validates with. */
export const internalOpenapiDocument = (): Json => read('openapi-internal.json');
/** The AsyncAPI document served at /asyncapi.json. */
export const asyncapiDocument = (): Json => read('asyncapi.json');

let asyncapiAjv: Ajv2020 | undefined;
const payloadValidators = new Map<string, ValidateFunction>();

/** A validator of the payload of an AsyncAPI message component (`#/components/messages/<name>`). */
export function asyncapiPayloadValidator(component: string): ValidateFunction {
  let v = payloadValidators.get(component);
  if (!v) {
    if (!asyncapiAjv) {
      asyncapiAjv = makeAjv();
      // Closed (withClosedObjects) except the carriers' frames, which may carry fields the contract does not list.
      asyncapiAjv.addSchema(
        withClosedObjects(
          asyncapiDocument(),
          (at) => at[0] === 'channels' || (at[0] === 'components' && at[1] === 'messages' && /^provider[AB]/.test(at[2] ?? '')),
        ),
        'asyncapi.json',
      );
    }
    v = asyncapiAjv.compile({ $ref: `asyncapi.json#/components/messages/${component}/payload` });
    payloadValidators.set(component, v);
  }
  return v;
}

let openapiAjv: Ajv2020 | undefined;
const schemaValidators = new Map<string, ValidateFunction>();

/** A validator of an OpenAPI schema component (`#/components/schemas/<name>`), as the contract writes it. */
export function openapiSchemaValidator(name: string): ValidateFunction {
  let v = schemaValidators.get(name);
  if (!v) {
    if (!openapiAjv) {
      openapiAjv = makeAjv();
      openapiAjv.addSchema(internalOpenapiDocument(), 'openapi-internal.json');
    }
    v = openapiAjv.compile({ $ref: `openapi-internal.json#/components/schemas/${name}` });
    schemaValidators.set(name, v);
  }
  return v;
}
