/**
 * Request validation (Ajv with allErrors) looks at every item of an array, those past its `maxItems`
 * too: 80,000 integers in a webhook's `events` (bounded at 16) held the loop for 100-200 ms of item
 * errors before the 422 (issue 32). Every array of a request schema has a `maxItems`
 * (lint/functions/boundedInput.js), so validation is given the body with each array cut to one item
 * past the largest `maxItems` of the contract: an array that long breaks its own bound whatever its
 * items say, one within it is left whole, so a body is valid exactly when it was. The body itself is
 * not changed: arrays are cut in copies, and only the objects on the way to them are copied.
 */

/** The largest `maxItems` anywhere in `document`. */
export function largestMaxItems(document: unknown): number {
  let largest = 0;
  const walk = (node: unknown) => {
    if (node === null || typeof node !== 'object') return;
    const maxItems = (node as { maxItems?: unknown }).maxItems;
    if (typeof maxItems === 'number') largest = Math.max(largest, maxItems);
    for (const child of Object.values(node)) walk(child);
  };
  walk(document);
  return largest;
}

/** Beyond this nesting the body is left as it is (validation bounds its own depth). */
const MAX_DEPTH = 64;

/** `value` with every array longer than `limit` + 1 cut to that; `value` itself when none is. */
export function clampArrays(value: unknown, limit: number, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    const kept = value.length > limit + 1 ? value.slice(0, limit + 1) : value;
    let copy: unknown[] | null = kept === value ? null : kept;
    for (let i = 0; i < kept.length; i++) {
      const item = clampArrays(kept[i], limit, depth + 1);
      if (item !== kept[i]) (copy ??= kept.slice())[i] = item;
    }
    return copy ?? value;
  }
  let copy: Record<string, unknown> | null = null;
  for (const [key, child] of Object.entries(value)) {
    const clamped = clampArrays(child, limit, depth + 1);
    if (clamped !== child) (copy ??= { ...(value as Record<string, unknown>) })[key] = clamped;
  }
  return copy ?? value;
}
