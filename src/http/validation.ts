/** Turns Ajv errors of request validation into one 422 ApiError (with every problem kept as an issue). */
import type { ErrorObject } from 'ajv';
import { ApiError, type ValidationIssue, code422 } from './errors.js';

const LOCATIONS: Record<string, string> = { requestBody: 'body', query: 'query', path: 'path', header: 'header' };
const NOISE = new Set(['oneOf', 'anyOf', 'allOf', 'if', 'then', 'else', 'not', '$ref']);

interface Mapped extends ValidationIssue {
  code: string;
  param: string;
  rank: number;
}

function pathOf(instancePath: string): { loc: string[]; field: string[] } {
  const parts = instancePath
    .split('/')
    .slice(1)
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const where = LOCATIONS[parts[0] ?? ''] ?? 'body';
  const field = parts.slice(1);
  return { loc: [where, ...field], field };
}

function describe(field: string[]): string {
  return field.length ? `'${field.join('.')}'` : 'The request body';
}

function mapOne(e: ErrorObject, data: unknown): Mapped | null {
  const { loc, field } = pathOf(e.instancePath);
  const params = e.params as Record<string, unknown>;
  const at = (extra?: string) => (extra ? [...field, extra] : field);
  switch (e.keyword) {
    case 'additionalProperties':
    case 'unevaluatedProperties': {
      const name = String(params.additionalProperty ?? params.unevaluatedProperty);
      const f = at(name);
      const where = loc[0] === 'query' ? 'query parameter' : 'field';
      return {
        loc: [...loc, name],
        msg: `Unknown ${where} ${describe(f)}.`,
        type: 'extra_forbidden',
        code: 'unknown_field',
        param: f.join('.'),
        rank: 0,
        input: valueAt(data, `${e.instancePath}/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`),
      };
    }
    case 'required': {
      const name = String(params.missingProperty);
      if (e.instancePath === '' && name === 'requestBody') {
        return { loc: ['body'], msg: 'A JSON request body is required.', type: 'missing', code: 'missing_body', param: '', rank: 1 };
      }
      if (e.instancePath === '') return null;
      const f = at(name);
      // The input of a missing field is the object it is missing from.
      return {
        loc: [...loc, name],
        msg: `Field ${describe(f)} is required.`,
        type: 'missing',
        code: 'missing_field',
        param: f.join('.'),
        rank: 1,
        input: valueAt(data, e.instancePath),
      };
    }
    case 'type': {
      const expected = Array.isArray(params.type) ? (params.type as string[]).join(' or ') : String(params.type);
      return {
        loc,
        msg: `${describe(field)} must be ${/^[aeiou]/.test(expected) ? 'an' : 'a'} ${expected}.`,
        type: `${String(params.type).split(',')[0]}_type`,
        code: 'invalid_type',
        param: field.join('.'),
        rank: 2,
        input: valueAt(data, e.instancePath),
        ctx: { expected_type: params.type },
      };
    }
    case 'not':
      return {
        loc,
        msg: `${describe(field)} has a form that is not allowed here.`,
        type: 'not',
        code: 'invalid_value',
        param: field.join('.'),
        rank: 3,
        input: valueAt(data, e.instancePath),
      };
    case 'enum': {
      // A value the schema lists under `x-unsupported-values` (e.g. transport 'stdio') gets its own code and explanation.
      const unsupported = (e.parentSchema as { 'x-unsupported-values'?: Record<string, string> } | undefined)?.['x-unsupported-values'];
      const value = valueAt(data, e.instancePath);
      if (unsupported && typeof value === 'string' && Object.hasOwn(unsupported, value) && field.length) {
        return {
          loc,
          msg: unsupported[value],
          type: 'enum',
          code: `unsupported_${field[field.length - 1]}`,
          param: field.join('.'),
          rank: 3,
          input: value,
          ctx: { expected: params.allowedValues },
        };
      }
      return {
        loc,
        msg: `${describe(field)} must be one of: ${(params.allowedValues as unknown[]).map(String).join(', ')}.`,
        type: 'enum',
        code: 'invalid_value',
        param: field.join('.'),
        rank: 3,
        input: valueAt(data, e.instancePath),
        ctx: { expected: params.allowedValues },
      };
    }
    default:
      if (NOISE.has(e.keyword)) return null;
      return {
        loc,
        msg: `${describe(field)} ${e.message ?? 'is invalid'}.`,
        type: e.keyword,
        code: 'invalid_value',
        param: field.join('.'),
        rank: 3,
        input: valueAt(data, e.instancePath),
        ctx: params,
      };
  }
}

/** Never echo what might be a credential back in an error: these fields, and whole objects that carry them. */
const SECRET_FIELD = /password|token|secret|api_key|public_key|authorization|headers|credential|static_auth|oauth|provider_[ab]_config/i;

/** Problems listed in a 422 at most (the contract's maxItems). */
const MAX_ISSUES = 50;
/**
 * Ajv reports every problem (allErrors), items past `maxItems` included: an 80,000-item array gives
 * 80,000 errors. Only this many are read (the first ones; a bound such as `maxItems` comes first),
 * so refusing a hostile body costs no more than reading a sane one.
 */
export const MAX_ERRORS_READ = 1_000;

/** An echoed input is cut to this: nesting, items per level, characters per string, nodes in all. */
const ECHO = { depth: 6, items: 20, chars: 200, nodes: 200 };

/**
 * A bounded copy of an input for the error body: deep, long or large values are cut (a 100,000-deep
 * array would otherwise overflow JSON serialisation), secret-named fields are replaced.
 */
export function boundedEcho(value: unknown): unknown {
  let nodes = 0;
  const copy = (v: unknown, depth: number): unknown => {
    nodes += 1;
    if (typeof v === 'string') return v.length > ECHO.chars ? `${v.slice(0, ECHO.chars)}…` : v;
    if (v === null || typeof v !== 'object') return v;
    if (depth >= ECHO.depth || nodes > ECHO.nodes) return Array.isArray(v) ? '[…]' : '{…}';
    if (Array.isArray(v)) {
      const out = v.slice(0, ECHO.items).map((x) => copy(x, depth + 1));
      if (v.length > ECHO.items) out.push(`… ${v.length - ECHO.items} more`);
      return out;
    }
    const out: Record<string, unknown> = {};
    const entries = Object.entries(v as Record<string, unknown>);
    for (const [k, x] of entries.slice(0, ECHO.items)) out[k] = SECRET_FIELD.test(k) ? '[redacted]' : copy(x, depth + 1);
    if (entries.length > ECHO.items) out['…'] = `${entries.length - ECHO.items} more fields`;
    return out;
  };
  return copy(value, 0);
}

function valueAt(data: unknown, instancePath: string): unknown {
  if (SECRET_FIELD.test(instancePath)) return '[redacted]';
  let node = data;
  for (const part of instancePath.split('/').slice(1)) node = (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return boundedEcho(node);
}

/**
 * `oneOf: [Schema, {type: 'null'}]` (a nullable object) reports "must be null" next to the real problem
 * of the object branch; that noise goes when another error concerns the same field or one inside it.
 */
function dropNullBranchNoise(errors: ErrorObject[]): ErrorObject[] {
  return errors.filter(
    (e) =>
      !(
        e.keyword === 'type' &&
        (e.params as { type?: unknown }).type === 'null' &&
        errors.some(
          (o) =>
            o !== e &&
            o.keyword !== 'oneOf' &&
            !(o.keyword === 'type' && (o.params as { type?: unknown }).type === 'null') &&
            (o.instancePath === e.instancePath || o.instancePath.startsWith(`${e.instancePath}/`)),
        )
      ),
  );
}

/**
 * `data` is the object validated: {requestBody, query, path, header}. `headers`: the operation's
 * header parameters as the contract spells them (Node gives them lower-cased), for `param`.
 */
export function validationError(errors: ErrorObject[], data?: unknown, headers: string[] = []): ApiError<422> {
  const seen = new Set<string>();
  const mapped = dropNullBranchNoise(errors.slice(0, MAX_ERRORS_READ))
    .map((e) => mapOne(e, data))
    .filter((m): m is Mapped => m !== null)
    .filter((m) => {
      const key = `${m.loc.join('.')}|${m.type}`;
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    })
    .sort((a, b) => a.rank - b.rank);
  const first = mapped[0] ?? { msg: 'The request is invalid.', code: 'invalid_request', param: '', loc: ['body'], type: 'invalid', rank: 9 };
  const issues: ValidationIssue[] = mapped
    .slice(0, MAX_ISSUES)
    .map(({ loc, msg, type, input, ctx }) => ({ loc, msg, type, ...(input !== undefined ? { input } : {}), ...(ctx ? { ctx } : {}) }));
  const param = (first.loc[0] === 'header' && headers.find((h) => h.toLowerCase() === first.param)) || first.param || null;
  return new ApiError(422, 'invalid_request_error', code422(first.code), first.msg, { param, issues });
}

/** Ajv errors of a request body schema (instance paths relative to the body) as the API's 422. */
export function bodyValidationError(errors: ErrorObject[], body: unknown): ApiError<422> {
  return validationError(
    errors.slice(0, MAX_ERRORS_READ).map((e) => ({ ...e, instancePath: `/requestBody${e.instancePath}` })),
    { requestBody: body },
  );
}
