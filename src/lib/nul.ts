/** NUL characters (U+0000), which PostgreSQL cannot store in text or jsonb. */

const MAX_NODES = 200_000;

/**
 * The dotted path of the first string (key or value) holding a NUL, or null. Iterative, so depth cannot
 * overflow the stack. Every request's input is scanned and almost none holds a NUL, so a node keeps
 * only its parent's entry and its own key, and the path is spelt out only for the node that has one.
 */
export function findNul(value: unknown, root: string): string | null {
  if (typeof value === 'string') return value.includes('\0') ? root : null;
  if (!value || typeof value !== 'object') return null;
  // Most requests' query and path parameters are empty objects: nothing to scan, nothing to allocate.
  if (!Array.isArray(value) && isEmpty(value)) return null;
  // Entries seen so far: the value, the entry of the object or array holding it, its key there.
  const values: unknown[] = [value];
  const parents: number[] = [-1];
  const keys: Array<string | number> = [root];
  const stack: number[] = [0];
  let seen = 0;
  while (stack.length && seen++ < MAX_NODES) {
    const at = stack.pop()!;
    const v = values[at];
    if (typeof v === 'string') {
      if (v.includes('\0')) return pathOf(at, parents, keys);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) {
        stack.push(values.push(v[i]) - 1);
        parents.push(at);
        keys.push(i);
      }
    } else if (v && typeof v === 'object') {
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        if (k.includes('\0')) return pathOf(at, parents, keys);
        stack.push(values.push((v as Record<string, unknown>)[k]) - 1);
        parents.push(at);
        keys.push(k);
      }
    }
  }
  return null;
}

function isEmpty(value: object): boolean {
  for (const k in value) if (Object.hasOwn(value, k)) return false;
  return true;
}

function pathOf(at: number, parents: number[], keys: Array<string | number>): string {
  const parts: Array<string | number> = [];
  for (let i = at; i !== -1; i = parents[i]) parts.push(keys[i]);
  return parts.reverse().join('.');
}
