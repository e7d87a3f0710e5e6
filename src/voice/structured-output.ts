/**
 * A tenant's JSON Schema as the analysis model's structured output takes it (`generationConfig.
 * responseJsonSchema` of generateContent). Gemini honours a subset of JSON Schema, listed in the
 * @google/genai docs of `GenerationConfig.responseJsonSchema`: `$id`, `$defs`, `$ref`, `$anchor`,
 * `type`, `format`, `title`, `description`, `enum` (strings and numbers), `items`, `prefixItems`,
 * `minItems`, `maxItems`, `minimum`, `maximum`, `anyOf`, `oneOf` (as `anyOf`), `properties`,
 * `additionalProperties`, `required`, and the non-standard `propertyOrdering`; a sub-schema with `$ref`
 * may carry only `$` keywords besides. So the model gets the schema reduced to that subset: `const` as a
 * one-value `enum`, every other constraint (`pattern`, `minLength`, `multipleOf`, `allOf`, `not`...)
 * written into the `description` it reads. Its answer is then validated against the whole schema by
 * the service, so nothing the model was not held to slips through.
 */
import { SUBSCHEMA_LIST_KEYWORDS } from '../contract/tenant-schema.js';

const HONOURED = new Set([
  '$defs',
  '$ref',
  '$anchor',
  'type',
  'format',
  'title',
  'description',
  'enum',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'minimum',
  'maximum',
  'anyOf',
  'oneOf',
  'properties',
  'additionalProperties',
  'required',
  'propertyOrdering',
]);
const SCHEMA_MAPS = new Set(['properties', '$defs']);
const SINGLE_SCHEMAS = new Set(['items', 'additionalProperties']);
const NOTE_MAX = 200;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function note(key: string, value: unknown): string {
  const text = `${key} ${JSON.stringify(value)}`;
  return text.length > NOTE_MAX ? `${text.slice(0, NOTE_MAX - 3)}...` : text;
}

/**
 * `schema` reduced to what the model honours. `refBase` is where the schema will sit in the request's
 * schema (`#/properties/data`): its local `$ref`s (`#`, `#/...`) are rebased there; `#name` anchors
 * stay as they are.
 */
export function forStructuredOutput(schema: unknown, refBase = '#'): unknown {
  if (!isObject(schema)) return schema;
  const out: Record<string, unknown> = {};
  const notes: string[] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$ref' && typeof value === 'string') {
      out.$ref = value === '#' ? refBase : value.startsWith('#/') ? `${refBase}${value.slice(1)}` : value;
    } else if (SCHEMA_MAPS.has(key) && isObject(value)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, forStructuredOutput(sub, refBase)]));
    } else if (SINGLE_SCHEMAS.has(key)) {
      out[key] = forStructuredOutput(value, refBase);
    } else if (SUBSCHEMA_LIST_KEYWORDS.has(key) && HONOURED.has(key) && Array.isArray(value)) {
      out[key] = value.map((sub) => forStructuredOutput(sub, refBase));
    } else if (key === 'const' && !('enum' in schema) && (typeof value === 'string' || typeof value === 'number')) {
      out.enum = [value];
    } else if (HONOURED.has(key)) {
      out[key] = value;
    } else if (!key.startsWith('$')) {
      notes.push(note(key, value));
    }
  }
  if ('$ref' in out) return Object.fromEntries(Object.entries(out).filter(([k]) => k.startsWith('$')));
  if (notes.length)
    out.description = [typeof out.description === 'string' ? out.description : '', `Constraints: ${notes.join('; ')}.`].filter(Boolean).join(' ');
  return out;
}
