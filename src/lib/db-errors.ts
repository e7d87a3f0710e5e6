/** Recognising PostgreSQL errors in stores, so they leave the store as catalogue errors. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23505' && (!constraint || e.constraint === constraint);
}

export function isCheckViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23514' && (!constraint || e.constraint === constraint);
}

export function isForeignKeyViolation(err: unknown, constraint?: string): boolean {
  const e = err as { code?: string; constraint?: string };
  return e?.code === '23503' && (!constraint || e.constraint === constraint);
}
