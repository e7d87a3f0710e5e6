/**
 * How the sandbox analysis model fills `data` (the schema under `properties.data` of generateContent's
 * `responseJsonSchema`) and judges `success`, from what the person said: the transcript's `user` turns.
 * Fixed rules, so tests know the exact result:
 *
 * Data
 *  1. A user turn states `<name> is <value>` (or `are`, `was`, `:`, `=` in place of `is`), <name> being
 *     a property's name, case-insensitive, an underscore in it matching an underscore or a space, and
 *     starting a word. The value runs to the next `;`, to a `.`, `!` or `?` followed by a space or the
 *     end, or to the end of the turn, and is trimmed. A later statement of a name replaces an earlier one.
 *  2. The value becomes, by the property's `type` (the first entry of a list that is not "null"):
 *     - string: as said; with an `enum`, the enum value equal to it ignoring case, else as said;
 *     - number / integer: the first number in it (`-?\d+(\.\d+)?`), as a number (an integer property
 *       gets 3.5 when 3.5 was said), else the value as said;
 *     - boolean: the whole value, ignoring case: yes, true, agree, agreed, consent, confirmed, correct
 *       -> true; no, false, decline, declined, refuse, refused -> false; else as said;
 *     - array: the value split at `,` and ` and `, each item by the `items` type;
 *     - object: its own properties, each stated on its own by these rules;
 *     - anything else (no type, anyOf/oneOf): as said.
 *  3. A property no turn states is left out, or is null when its type allows null. An object property
 *     none of whose properties is stated counts as not stated.
 *  4. A `$ref` is followed within the request's `responseJsonSchema`.
 *  5. Objects and arrays are filled to 16 levels below `data`, and 4,096 of them in all (the
 *     service's own schema budget); one past either is left out (an object) or kept as said (an
 *     array), so a schema that refers to itself ends like any other.
 *  So `data` holds what was heard, right or wrong; the service's validation decides (a required
 *  property never stated, or a value breaking the schema's pattern, enum, bounds or format, makes
 *  `data` null with `invalid_output`).
 *
 * Success
 *  The criteria's double-quoted phrases are looked for in the user turns, ignoring case:
 *  - all said: `{met: true, reason: 'The caller said "<p1>" and "<p2>".'}` (phrases in order);
 *  - one not said: `{met: false, reason: 'The caller did not say "<the first missing phrase>".'}`;
 *  - no quoted phrase: `met` is the fixed analysis's `goal_met`, the reason `The criteria quote no
 *    phrase; the agent's goal was met.` (or `was not met.`).
 */

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const TRUE_WORDS = new Set(['yes', 'true', 'agree', 'agreed', 'consent', 'confirmed', 'correct']);
const FALSE_WORDS = new Set(['no', 'false', 'decline', 'declined', 'refuse', 'refused']);

/** The last value stated for `name` in the user turns (rule 1), or undefined. */
export function statedValue(name: string, userTurns: string[]): string | undefined {
  const spelled = escapeRegExp(name).replace(/_/g, '[_ ]');
  const statement = new RegExp(`(?<!\\w)${spelled}(?:\\s+(?:is|are|was)\\s+|\\s*[:=]\\s*)`, 'gi');
  let found: string | undefined;
  for (const turn of userTurns) {
    for (const m of turn.matchAll(statement)) {
      const rest = turn.slice(m.index + m[0].length);
      const end = /;|[.!?](?=\s|$)/.exec(rest);
      found = (end ? rest.slice(0, end.index) : rest).trim();
    }
  }
  return found;
}

function resolve(schema: unknown, root: Json): unknown {
  let node = schema;
  for (let hops = 0; isObject(node) && typeof node.$ref === 'string' && hops < 16; hops++) {
    const ref = node.$ref;
    if (!ref.startsWith('#')) return {};
    let at: unknown = root;
    for (const part of ref.slice(1).split('/').filter(Boolean)) {
      const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
      at = isObject(at) ? at[key] : Array.isArray(at) ? at[Number(key)] : undefined;
    }
    node = at;
  }
  return node;
}

function typesOf(schema: Json): string[] {
  return Array.isArray(schema.type) ? (schema.type as string[]) : typeof schema.type === 'string' ? [schema.type] : [];
}

/** Levels of objects and arrays filled below `data`, and how many in all (rule 5). */
const MAX_LEVELS = 16;
const MAX_FILLED = 4_096;
interface Walk {
  root: Json;
  userTurns: string[];
  filled: number;
}
const mayGoDeeper = (walk: Walk, level: number) => level < MAX_LEVELS && walk.filled++ < MAX_FILLED;

function convert(schema: Json, text: string, walk: Walk, level: number): unknown {
  const type = typesOf(schema).find((t) => t !== 'null');
  if (type === 'string') {
    const match = Array.isArray(schema.enum) ? schema.enum.find((v) => typeof v === 'string' && v.toLowerCase() === text.toLowerCase()) : undefined;
    return match ?? text;
  }
  if (type === 'number' || type === 'integer') {
    const n = /-?\d+(?:\.\d+)?/.exec(text);
    return n ? Number(n[0]) : text;
  }
  if (type === 'boolean') {
    const word = text.toLowerCase();
    return TRUE_WORDS.has(word) ? true : FALSE_WORDS.has(word) ? false : text;
  }
  if (type === 'array' && mayGoDeeper(walk, level)) {
    const items = resolve(schema.items, walk.root);
    return text
      .split(/,|\s+and\s+/)
      .map((s) => s.trim())
      .filter(Boolean)
      .map((item) => (isObject(items) ? convert(items, item, walk, level + 1) : item));
  }
  return text;
}

/** An object schema filled from the user turns (rules 1-4), and whether any of its properties was stated. */
function fillObject(schema: Json, walk: Walk, level: number): { value: Json; stated: boolean } {
  const value: Json = {};
  let stated = false;
  for (const [name, raw] of Object.entries(isObject(schema.properties) ? schema.properties : {})) {
    const prop = resolve(raw, walk.root);
    if (!isObject(prop)) continue;
    let filled: unknown;
    if (typesOf(prop).includes('object')) {
      const inner = mayGoDeeper(walk, level) ? fillObject(prop, walk, level + 1) : { value: {}, stated: false };
      filled = inner.stated ? inner.value : undefined;
    } else {
      const text = statedValue(name, walk.userTurns);
      filled = text === undefined ? undefined : convert(prop, text, walk, level + 1);
    }
    if (filled !== undefined) {
      value[name] = filled;
      stated = true;
    } else if (typesOf(prop).includes('null')) {
      value[name] = null;
    }
  }
  return { value, stated };
}

/** `data` for the request's schema (`responseJsonSchema.properties.data`) from the user turns. */
export function extractData(responseSchema: Json, userTurns: string[]): Json {
  const schema = resolve(isObject(responseSchema.properties) ? responseSchema.properties.data : undefined, responseSchema);
  return isObject(schema) ? fillObject(schema, { root: responseSchema, userTurns, filled: 0 }, 1).value : {};
}

/** `success` for the criteria from the user turns (the rules above). */
export function judgeSuccess(criteria: string, userTurns: string[], goalMet: boolean): { met: boolean; reason: string } {
  const phrases = [...criteria.matchAll(/"([^"]+)"/g)].map((m) => m[1]);
  if (phrases.length === 0) {
    return { met: goalMet, reason: `The criteria quote no phrase; the agent's goal was ${goalMet ? 'met' : 'not met'}.` };
  }
  const said = userTurns.join('\n').toLowerCase();
  const missing = phrases.find((p) => !said.includes(p.toLowerCase()));
  if (missing !== undefined) return { met: false, reason: `The caller did not say "${missing}".` };
  return { met: true, reason: `The caller said ${phrases.map((p) => `"${p}"`).join(' and ')}.` };
}
