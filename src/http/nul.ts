/**
 * NUL characters (U+0000) in request input. PostgreSQL cannot store them in text or jsonb, so a NUL
 * anywhere in a body, query or path is refused up front (422 naming the field) instead of failing at
 * the insert, possibly after outbound work was done.
 */
import { unprocessable } from './errors.js';

import { findNul } from '../lib/nul.js';

export { findNul };

/** 422 `invalid_value` when any of the named parts holds a NUL; `param` is the field without its part's prefix. */
export function refuseNul(parts: Record<string, unknown>): void {
  for (const name in parts) {
    const at = findNul(parts[name], name);
    if (at === null) continue;
    const param = at.split('.').slice(1).join('.') || name;
    throw unprocessable('invalid_value', `'${param.slice(0, 200)}' contains a NUL character (U+0000), which is not allowed.`, param.slice(0, 200));
  }
}
