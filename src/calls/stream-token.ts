import { randomBytes } from 'node:crypto';

/** A single-use secret the carrier's media stream presents (`mst_` + 43 base64url characters); only its hash is stored. */
export function newStreamToken(): string {
  return `mst_${randomBytes(32).toString('base64url')}`;
}
