/** The tenant schemas issue 32 stalled the service with, for tests of both kinds of tenant schema. */

/**
 * A small schema (about 1.4 KB at 20 levels) whose `$defs` branch into two `$ref`s per level, ending in
 * an enum: validating a value that fails the enum tries every path, 2^levels of them.
 */
export function branchingSchema(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { [`l${levels}`]: { enum: ['yes'] } };
  for (let i = 0; i < levels; i++) defs[`l${i}`] = { anyOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] };
  return { type: 'object', properties: { v: { $ref: '#/$defs/l0' } }, $defs: defs };
}

/** `count` plain string properties (1,500 of them make the 109 KB schema of the issue). */
export function wideSchema(count: number, tag = ''): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < count; i++) properties[`field_${tag}${i}`] = { type: 'string', description: `The caller's field number ${i}.` };
  return { type: 'object', properties };
}
