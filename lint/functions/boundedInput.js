// Every array a client sends has `maxItems` and every string `maxLength` (issue 32: an unbounded
// array stalled the event loop and overflowed the validator's stack), unless its values are listed
// (`enum`, `const`) or its pattern admits only strings of a bounded length. Walks one resolved
// request schema; Spectral has no built-in for "every nested schema", so this walks it by hand.
const BRANCHES = ['allOf', 'anyOf', 'oneOf', 'prefixItems'];
const SUBSCHEMAS = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'unevaluatedProperties', 'propertyNames'];

const types = (schema) => (Array.isArray(schema.type) ? schema.type : schema.type ? [schema.type] : []);
const listed = (schema) => 'const' in schema || Array.isArray(schema.enum);
// A file part of a multipart form: bounded by the upload's size limit (413), not `maxLength`, which
// generators read as a string's length (openapi-zod-client writes `z.instanceof(File).max(n)`).
const file = (schema) => schema.format === 'binary';
// ^...$ with no open-ended quantifier (*, +, {n,}) outside a character class admits a bounded length.
const boundedPattern = (pattern) =>
  typeof pattern === 'string' && pattern.startsWith('^') && pattern.endsWith('$') && !/[*+]|\{\d+,\}/.test(pattern.replace(/\\.|\[[^\]]*\]/g, 'x'));

function check(schema, path, seen, results) {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema) || seen.has(schema)) return;
  seen.add(schema);
  const kinds = types(schema);
  if (kinds.includes('array') && !('maxItems' in schema) && !listed(schema)) {
    results.push({ message: 'A request array has no `maxItems`.', path });
  }
  if (kinds.includes('string') && !('maxLength' in schema) && !listed(schema) && !file(schema) && !boundedPattern(schema.pattern)) {
    results.push({ message: 'A request string has no `maxLength` (nor `enum`, `const` or a bounded pattern).', path });
  }
  for (const [name, sub] of Object.entries(schema.properties ?? {})) check(sub, [...path, 'properties', name], seen, results);
  for (const [name, sub] of Object.entries(schema.patternProperties ?? {})) check(sub, [...path, 'patternProperties', name], seen, results);
  for (const key of BRANCHES) (schema[key] ?? []).forEach((sub, i) => check(sub, [...path, key, i], seen, results));
  for (const key of SUBSCHEMAS) check(schema[key], [...path, key], seen, results);
}

export default function boundedInput(schema, _options, context) {
  const results = [];
  check(schema, context.path, new Set(), results);
  return results;
}
