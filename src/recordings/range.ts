/**
 * One `Range: bytes=...` of a file of `size` bytes (RFC 9110 14.1.2): `first-last`, `first-` or
 * `-suffix`; of several ranges only the first is served. Parsed without regular expressions.
 */
export type RangeAnswer = { start: number; end: number } | 'unsatisfiable' | null;

const digits = (s: string) => s.length > 0 && s.length <= 15 && [...s].every((c) => c >= '0' && c <= '9');

/** null: no usable Range (serve the whole file); 'unsatisfiable': 416; else the inclusive byte span. */
export function parseRange(header: string | undefined, size: number): RangeAnswer {
  if (!header) return null;
  const trimmed = header.trim();
  if (!trimmed.toLowerCase().startsWith('bytes=')) return null;
  const first = trimmed.slice(6).split(',')[0].trim();
  const dash = first.indexOf('-');
  if (dash < 0) return null;
  const a = first.slice(0, dash).trim();
  const b = first.slice(dash + 1).trim();
  if (a === '') {
    if (!digits(b)) return null;
    const suffix = Number(b);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  if (!digits(a) || (b !== '' && !digits(b))) return null;
  const start = Number(a);
  const end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
  if (b !== '' && Number(b) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end };
}
