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
      asyncapiAjv.addSchema(asyncapiDocument(), 'asyncapi.json');
    }
    v = asyncapiAjv.compile({ $ref: `asyncapi.json#/components/messages/${component}/payload` });
    payloadValidators.set(component, v);
  }
  return v;
}
