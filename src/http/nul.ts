/**
 * NUL characters (U+0000) in request input. PostgreSQL cannot store them in text or jsonb, so a NUL
 * anywhere in a body, query or path is refused up front (422 naming the field) instead of failing at
 * the insert, possibly after outbound work was done.
 */
import { unprocessable } from './errors.js';

const MAX_NODES = 200_000;

/** The dotted path of the first string (key or value) holding a NUL, or null. Iterative, so depth cannot overflow the stack. */
export function findNul(value: unknown, root: string): string | null {
  const stack: Array<[unknown, string]> = [[value, root]];
  let seen = 0;
  while (stack.length && seen++ < MAX_NODES) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      if (v.includes('\0')) return path;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}.${i}`]);
    } else if (v && typeof v === 'object') {
      for (const [k, child] of Object.entries(v)) {
        if (k.includes('\0')) return path;
        stack.push([child, `${path}.${k}`]);
      }
    }
  }
  return null;
}

/** 422 `invalid_value` when any of the named parts holds a NUL; `param` is the field without its part's prefix. */
export function refuseNul(parts: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(parts)) {
    const at = findNul(value, name);
    if (at === null) continue;
    const param = at.split('.').slice(1).join('.') || name;
    throw unprocessable('invalid_value', `'${param.slice(0, 200)}' contains a NUL character (U+0000), which is not allowed.`, param.slice(0, 200));
  }
}
