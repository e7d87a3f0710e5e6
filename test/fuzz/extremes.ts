/**
 * The extremes a request schema allows, for the contract fuzzing (issue 32):
 * - `largest`: every property present, every string at its maxLength, every array at its maxItems,
 *   every open object at its maxProperties, the largest branch of each oneOf/anyOf, numbers at their
 *   maximum, until the JSON reaches `budget` bytes (the body limit: past it the parser refuses before
 *   any schema is looked at, which the mutations already send);
 * - `deepest`: the same structure with short scalars and one element per array or open object, and
 *   every free-form value (`{}`, `additionalProperties: true`) or recursive `$ref` nested `depth` deep.
 * Where the contract sets no bound, the value is capped (`caps`) and the place reported through `warn`.
 * json-schema-faker makes only values of a size it picks; this walks the schema for the bounds instead,
 * and asks json-schema-faker for strings with a format or pattern it cannot fill to length.
 */
import { generateSync } from 'json-schema-faker';

type Json = Record<string, any>;

export interface Caps {
  /** Characters of a string without maxLength. */
  length: number;
  /** Elements of an array without maxItems. */
  items: number;
  /** Keys of an open object without maxProperties. */
  properties: number;
  /** Depth of a free-form or recursive value. */
  depth: number;
}

export interface ExtremeOptions {
  mode: 'largest' | 'deepest';
  caps: Caps;
  /** JSON bytes at which growth stops. */
  budget: number;
  /** The document `$ref`s point into (`#/components/...`). */
  root: Json;
  /** Called for each place without a bound, with its path and what was done there. */
  warn(where: string, what: string): void;
}

const FILLERS = ['x', 'a', '0', '1', 'A', 'Z', '_', ' ', 'é'];

class Walker {
  private used = 0;
  /** Whether the budget, not the contract, stopped growth somewhere. */
  truncated = false;

  constructor(private readonly o: ExtremeOptions) {}

  private left(): number {
    return this.o.budget - this.used;
  }

  private spend(v: unknown): unknown {
    this.used += JSON.stringify(v)?.length ?? 0;
    return v;
  }

  private resolve(s: Json | boolean, refDepth: number): { schema: Json | boolean; refDepth: number } {
    let cur = s;
    while (cur && typeof cur === 'object' && typeof cur.$ref === 'string' && cur.$ref.startsWith('#/')) {
      refDepth++;
      let target: any = this.o.root;
      for (const part of cur.$ref.slice(2).split('/')) target = target?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
      cur = { ...(target ?? {}), ...Object.fromEntries(Object.entries(cur).filter(([k]) => k !== '$ref')) };
    }
    return { schema: cur, refDepth };
  }

  value(input: Json | boolean | undefined, where: string, depth = 0, refDepth = 0): unknown {
    const r = this.resolve(input ?? true, refDepth);
    const s = r.schema;
    if (s === true || (typeof s === 'object' && isFreeForm(s))) return this.spend(this.free(where, depth));
    if (s === false) return null;
    if (r.refDepth > this.o.caps.depth) return null;
    if ('const' in s) return this.spend(s.const);
    if (Array.isArray(s.enum)) return this.spend(this.o.mode === 'largest' ? longest(s.enum) : s.enum[0]);
    if (s.allOf)
      return this.value(
        mergeAll(
          s.allOf.map((x: Json) => this.resolve(x, r.refDepth).schema),
          s,
        ),
        where,
        depth,
        r.refDepth,
      );
    const branches = s.oneOf ?? s.anyOf;
    if (Array.isArray(branches)) {
      // The branch that makes the largest (or deepest) value; each is built on the same budget.
      const start = this.used;
      let best: { v: unknown; size: number; used: number } | undefined;
      for (const b of branches) {
        this.used = start;
        const v = this.value({ ...withoutKeys(s, ['oneOf', 'anyOf']), ...(this.resolve(b, r.refDepth).schema as Json) }, where, depth, r.refDepth);
        const size = this.o.mode === 'largest' ? (JSON.stringify(v)?.length ?? 0) : nesting(v);
        if (!best || size > best.size) best = { v, size, used: this.used };
      }
      this.used = best?.used ?? start;
      return best?.v;
    }
    const type = pickType(s);
    switch (type) {
      case 'object':
        return this.object(s, where, depth, r.refDepth);
      case 'array':
        return this.array(s, where, depth, r.refDepth);
      case 'string':
        return this.spend(this.string(s, where));
      case 'integer':
      case 'number':
        return this.spend(this.number(s, type));
      case 'boolean':
        return this.spend(true);
      case 'null':
        return null;
      default:
        return this.spend(this.free(where, depth));
    }
  }

  private object(s: Json, where: string, depth: number, refDepth: number): Json {
    const out: Json = {};
    this.used += 2;
    const props = Object.entries((s.properties ?? {}) as Record<string, Json>).filter(([, p]) => !p.readOnly);
    const required = new Set<string>(s.required ?? []);
    for (const [k, p] of props) {
      if (this.o.mode === 'largest' && !required.has(k) && this.left() <= 0) {
        this.truncated = true;
        continue;
      }
      this.used += k.length + 4;
      out[k] = this.value(p, `${where}.${k}`, depth + 1, refDepth);
    }
    const extra = s.additionalProperties ?? s.patternProperties;
    if (extra === undefined || extra === false) return out;
    const extraSchema = s.patternProperties ? Object.values(s.patternProperties as Record<string, Json>)[0] : extra === true ? true : extra;
    let room = (s.maxProperties ?? NaN) - Object.keys(out).length;
    if (!Number.isFinite(room)) {
      room = this.o.caps.properties;
      this.o.warn(where, `no maxProperties: ${room} keys`);
    }
    if (this.o.mode === 'deepest') room = Math.min(room, 1);
    const keyPattern = s.propertyNames?.pattern ?? (s.patternProperties ? Object.keys(s.patternProperties)[0] : undefined);
    for (let i = 0; i < room; i++) {
      if (this.left() <= 0) {
        this.truncated = true;
        break;
      }
      const key = propertyName(i, keyPattern, s.propertyNames?.maxLength);
      if (key === undefined || key in out) break;
      this.used += key.length + 4;
      out[key] = this.value(extraSchema, `${where}.*`, depth + 1, refDepth);
    }
    return out;
  }

  private array(s: Json, where: string, depth: number, refDepth: number): unknown[] {
    let n = s.maxItems as number | undefined;
    if (n === undefined) {
      n = this.o.caps.items;
      this.o.warn(where, `no maxItems: ${n} items`);
    }
    if (this.o.mode === 'deepest') n = Math.max(Math.min(n, 1), s.minItems ?? 0);
    const out: unknown[] = [];
    const seen = new Set<string>();
    this.used += 2;
    for (let i = 0; i < n; i++) {
      if (i >= (s.minItems ?? 0) && this.left() <= 0) {
        this.truncated = true;
        break;
      }
      const tuple = Array.isArray(s.prefixItems) ? s.prefixItems[i] : undefined;
      let v = this.value(tuple ?? s.items ?? true, `${where}[]`, depth + 1, refDepth);
      if (s.uniqueItems) {
        if (typeof v === 'string' && seen.has(JSON.stringify(v))) v = `${v.slice(0, Math.max(0, v.length - String(i).length))}${i}`;
        if (seen.has(JSON.stringify(v))) break;
        seen.add(JSON.stringify(v));
      }
      out.push(v);
      this.used += 1;
    }
    return out;
  }

  private string(s: Json, where: string): string {
    const min = (s.minLength as number | undefined) ?? 0;
    const sample = (): string => {
      const v = fake(s);
      return typeof v === 'string' ? v : 'x'.repeat(Math.max(1, min));
    };
    if (this.o.mode === 'deepest') return s.format || s.pattern ? sample() : 'x'.repeat(Math.max(1, min));
    if (s.format && s.format !== 'uri') return sample();
    const max = (s.maxLength as number | undefined) ?? this.o.caps.length;
    const room = Math.max(min, Math.min(max, this.left() - 2));
    if (room < max) this.truncated = true;
    if (s.format === 'uri') {
      if (s.maxLength === undefined) this.o.warn(where, `no maxLength: ${room} characters`);
      const base = 'https://example.com/';
      return room > base.length ? base + 'a'.repeat(room - base.length) : sample();
    }
    const re = s.pattern ? new RegExp(s.pattern, 'u') : undefined;
    for (const f of FILLERS) {
      const fits = (n: number) => !re || re.test(f.repeat(n));
      if (!fits(room)) {
        // The longest run of the filler the pattern takes (a pattern such as `^[a-z_]{1,64}$`).
        let lo = Math.max(1, min);
        if (!fits(lo)) continue;
        let hi = room;
        while (hi - lo > 1) {
          const mid = (lo + hi) >> 1;
          if (fits(mid)) lo = mid;
          else hi = mid;
        }
        return f.repeat(lo);
      }
      if (s.maxLength === undefined) this.o.warn(where, `no maxLength: ${room} characters`);
      return f.repeat(room);
    }
    // A pattern no filler of that length matches (a fixed form such as an id or a phone number).
    return sample();
  }

  private number(s: Json, type: string): number {
    const top = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - (type === 'integer' ? 1 : 0.5) : undefined);
    if (this.o.mode === 'deepest' || top === undefined) return s.minimum ?? s.exclusiveMinimum ?? (top !== undefined ? Math.min(0, top) : 0) + 0;
    return top;
  }

  /** A value the schema does not constrain: as long as allowed, or nested as deep as allowed. */
  private free(where: string, depth: number): unknown {
    if (this.o.mode === 'largest') {
      const n = Math.max(0, Math.min(this.o.caps.length, this.left() - 2));
      this.o.warn(where, `free-form, no bound: a string of ${n} characters`);
      if (n < this.o.caps.length) this.truncated = true;
      return 'x'.repeat(n);
    }
    const levels = Math.max(0, this.o.caps.depth - depth);
    this.o.warn(where, `free-form, no depth bound: nested ${levels} levels`);
    let v: unknown = 1;
    for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { a: v };
    return v;
  }
}

function isFreeForm(s: Json): boolean {
  const keys = Object.keys(s).filter((k) => !['description', 'title', 'example', 'examples', 'default', 'deprecated', 'nullable', 'writeOnly'].includes(k));
  return keys.length === 0;
}

function pickType(s: Json): string | undefined {
  const t = s.type;
  if (Array.isArray(t)) return t.find((x: string) => x !== 'null') ?? t[0];
  if (t) return t;
  if (s.properties || s.additionalProperties !== undefined) return 'object';
  if (s.items) return 'array';
  if (s.maxLength !== undefined || s.pattern || s.format) return 'string';
  return undefined;
}

function withoutKeys(s: Json, keys: string[]): Json {
  return Object.fromEntries(Object.entries(s).filter(([k]) => !keys.includes(k)));
}

function mergeAll(parts: Json[], outer: Json): Json {
  const merged: Json = withoutKeys(outer, ['allOf']);
  for (const p of parts) {
    for (const [k, v] of Object.entries(p)) {
      if (k === 'properties') merged.properties = { ...(merged.properties ?? {}), ...v };
      else if (k === 'required') merged.required = [...(merged.required ?? []), ...v];
      else merged[k] ??= v;
    }
  }
  return merged;
}

function longest(values: unknown[]): unknown {
  return values.reduce((a, b) => ((JSON.stringify(b)?.length ?? 0) > (JSON.stringify(a)?.length ?? 0) ? b : a), values[0]);
}

function nesting(v: unknown): number {
  if (!v || typeof v !== 'object') return 0;
  let d = 0;
  let cur: unknown = v;
  while (cur && typeof cur === 'object') {
    d++;
    const vals = Object.values(cur as object);
    cur = vals.find((x) => x && typeof x === 'object');
  }
  return d;
}

function propertyName(i: number, pattern: string | undefined, maxLength: number | undefined): string | undefined {
  const re = pattern ? new RegExp(pattern, 'u') : undefined;
  for (const candidate of [`k${i}`, `K${i}`, `key_${i}`, `x-${i}`, `${i}`]) {
    if ((!re || re.test(candidate)) && (maxLength === undefined || candidate.length <= maxLength)) return candidate;
  }
  return undefined;
}

function fake(s: Json): unknown {
  try {
    return generateSync(s as never, { seed: 1, maxItems: 1, maxLength: 40 });
  } catch {
    return undefined;
  }
}

/** The extreme value of `schema` (see the module comment) and whether the budget cut it short. */
export function extreme(schema: Json, where: string, o: ExtremeOptions): { value: unknown; truncated: boolean } {
  const w = new Walker(o);
  const value = w.value(schema, where);
  return { value, truncated: w.truncated };
}
