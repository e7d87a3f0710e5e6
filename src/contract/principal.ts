/** Who is calling: set by the security handlers, read by handlers. */
export type Role = 'owner' | 'admin' | 'developer' | 'viewer';

export type Principal =
  | { kind: 'api_key'; workspaceId: string; keyId: string }
  | { kind: 'dashboard'; workspaceId: string; userId: string; role: Role; sessionId: string; expiresAt: Date }
  | { kind: 'operator' }
  | { kind: 'anonymous' };

const ROLE_RANK: Record<Role, number> = { viewer: 0, developer: 1, admin: 2, owner: 3 };

export function hasRole(role: Role, atLeast: Role): boolean {
  return ROLE_RANK[role] >= ROLE_RANK[atLeast];
}

export function workspaceOf(p: Principal): string {
  if (p.kind === 'api_key' || p.kind === 'dashboard') return p.workspaceId;
  throw new Error(`principal ${p.kind} has no workspace`);
}

/** The id of the API key or dashboard session the caller came with (revoking it ends what it opened). */
export function credentialOf(p: Principal): string | null {
  if (p.kind === 'api_key') return p.keyId;
  if (p.kind === 'dashboard') return p.sessionId;
  return null;
}
