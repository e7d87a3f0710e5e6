/** NUL characters (U+0000), which PostgreSQL cannot store in text or jsonb. */

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
