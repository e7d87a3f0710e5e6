/**
 * Workspaces and who may act in them: signup, login, dashboard sessions, members, API keys, and the
 * operator's view of billing fields. No Koa here; errors come from the catalogue.
 */
import type { Logger } from 'pino';
import { newId } from '../lib/ids.js';
import { newApiKey, newDashboardSessionToken, sha256Hex } from '../lib/tokens.js';
import type { Clock } from '../lib/clock.js';
import type { PageParams } from '../lib/pagination.js';
import { ApiError, forbidden, notFound, otherWorkspace, unauthorized } from '../errors/api-error.js';
import { hasRole, type Principal, type Role } from '../contract/principal.js';
import { DUMMY_HASH, hashPassword, verifyPassword } from './passwords.js';
import type { ApiKeyRow, UserRow, WorkspaceRow, WorkspaceStore } from './store.js';

/** What a new workspace starts with: enough that a newcomer's first sessions and calls simply work. */
export const NEW_WORKSPACE_DEFAULTS = {
  plan: 'trial',
  subscription_status: 'active',
  credit_balance_cents: 1000,
  concurrent_session_limit: 5,
} as const;

export interface WorkspaceServiceOptions {
  sessionTtlMs: number;
  keyLastUsedResolutionMs: number;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function toUser(u: UserRow) {
  return { id: u.id, email: u.email, role: u.role };
}
export function toMember(u: UserRow) {
  return { id: u.id, email: u.email, role: u.role, created_at: u.created_at.toISOString() };
}
export function toWorkspaceSummary(w: WorkspaceRow) {
  return { id: w.id, name: w.name };
}
export function toWorkspace(w: WorkspaceRow) {
  return {
    id: w.id,
    name: w.name,
    plan: w.plan as 'trial' | 'starter' | 'growth' | 'enterprise',
    subscription_status: w.subscription_status,
    credit_balance_cents: w.credit_balance_cents,
    concurrent_session_limit: w.concurrent_session_limit,
    created_at: w.created_at.toISOString(),
  };
}
export function toApiKey(k: ApiKeyRow) {
  return {
    id: k.id,
    name: k.name,
    key_prefix: k.key_prefix,
    revoked: k.revoked_at !== null,
    created_at: k.created_at.toISOString(),
    last_used_at: iso(k.last_used_at),
  };
}

export class WorkspaceService {
  constructor(
    private readonly store: WorkspaceStore,
    private readonly clock: Clock,
    private readonly opts: WorkspaceServiceOptions,
    private readonly log: Logger,
  ) {}

  private async startSession(user: UserRow) {
    const token = newDashboardSessionToken();
    const expiresAt = new Date(this.clock.now().getTime() + this.opts.sessionTtlMs);
    await this.store.createSession({
      id: newId('dashboardSession'),
      token_hash: sha256Hex(token),
      user_id: user.id,
      workspace_id: user.workspace_id,
      expires_at: expiresAt,
    });
    return { session_token: token, expires_at: expiresAt.toISOString() };
  }

  async signup(input: { email: string; password: string; workspace_name: string }) {
    const { workspace, user } = await this.store.createWorkspaceWithOwner(
      { id: newId('workspace'), name: input.workspace_name.trim(), ...NEW_WORKSPACE_DEFAULTS },
      { id: newId('user'), email: input.email.trim(), password_hash: await hashPassword(input.password) },
    );
    this.log.info({ workspaceId: workspace.id, userId: user.id }, 'workspace signed up');
    return { user: toUser(user), workspace: toWorkspaceSummary(workspace), ...(await this.startSession(user)) };
  }

  async login(input: { email: string; password: string }) {
    const user = await this.store.findUserByEmail(input.email.trim());
    // Verify against a dummy hash for unknown emails so timing does not reveal which emails exist.
    const ok = await verifyPassword(input.password, user?.password_hash ?? DUMMY_HASH);
    const workspace = user && ok ? await this.store.getWorkspace(user.workspace_id) : undefined;
    // An account whose workspace is gone is no account (login declares no 404).
    if (!user || !workspace) throw new ApiError(401, 'authentication_error', 'invalid_credentials', 'Incorrect email or password.');
    return { ...(await this.startSession(user)), user: toUser(user), workspace: toWorkspaceSummary(workspace) };
  }

  logout(sessionId: string) {
    return this.store.revokeSession(sessionId);
  }

  async currentSession(p: Extract<Principal, { kind: 'dashboard' }>) {
    const [workspace, users] = await Promise.all([this.store.getWorkspace(p.workspaceId), this.store.listUsers(p.workspaceId)]);
    const user = users.find((u) => u.id === p.userId);
    if (!workspace || !user) throw unauthorized('The dashboard session is no longer valid; log in again.');
    return { user: toUser(user), workspace: toWorkspaceSummary(workspace), expires_at: p.expiresAt.toISOString() };
  }

  /** Resolves a dashboard session token; null when unknown, expired or revoked. */
  async authenticateSession(token: string): Promise<Extract<Principal, { kind: 'dashboard' }> | null> {
    // Expiry is judged by the service clock, the same one that set expires_at.
    const row = await this.store.findLiveSession(sha256Hex(token), this.clock.now());
    if (!row) return null;
    return { kind: 'dashboard', workspaceId: row.workspace_id, userId: row.user_id, role: row.role, sessionId: row.id, expiresAt: row.expires_at };
  }

  /**
   * Resolves an API key; null when unknown or revoked. `last_used_at` is written only when the stored
   * value is older than the resolution, so a busy key costs one write a minute, not one per request.
   */
  async authenticateApiKey(key: string): Promise<Extract<Principal, { kind: 'api_key' }> | null> {
    const row = await this.store.findLiveApiKey(sha256Hex(key));
    if (!row) return null;
    const now = this.clock.now();
    if (!row.last_used_at || now.getTime() - row.last_used_at.getTime() >= this.opts.keyLastUsedResolutionMs) {
      this.store.touchApiKey(row.id, now).catch((err) => this.log.warn({ err, keyId: row.id }, 'could not record key use'));
    }
    return { kind: 'api_key', workspaceId: row.workspace_id, keyId: row.id };
  }

  listMembers(workspaceId: string) {
    return this.store.listUsers(workspaceId).then((users) => users.map(toMember));
  }

  async createMember(p: Extract<Principal, { kind: 'dashboard' }>, input: { email: string; password: string; role: Exclude<Role, 'owner'> }) {
    if (!hasRole(p.role, 'admin')) throw forbidden('insufficient_role', 'Only owners and admins can add members.');
    const user = await this.store.createUser({
      id: newId('user'),
      workspace_id: p.workspaceId,
      email: input.email.trim(),
      password_hash: await hashPassword(input.password),
      role: input.role,
    });
    return toMember(user);
  }

  async createApiKey(p: Extract<Principal, { kind: 'dashboard' }>, name: string) {
    if (!hasRole(p.role, 'developer')) throw forbidden('insufficient_role', "Creating API keys needs the 'developer' role or higher.");
    const key = newApiKey();
    const row = await this.store.createApiKey({
      id: newId('apiKey'),
      workspace_id: p.workspaceId,
      name: name.trim(),
      key_hash: sha256Hex(key),
      key_prefix: key.slice(0, 11),
      created_by: p.userId,
    });
    this.log.info({ workspaceId: p.workspaceId, keyId: row.id }, 'api key created');
    return { ...toApiKey(row), key };
  }

  listApiKeys(workspaceId: string) {
    return this.store.listApiKeys(workspaceId).then((rows) => rows.map(toApiKey));
  }

  async revokeApiKey(p: Extract<Principal, { kind: 'dashboard' }>, keyId: string) {
    const key = await this.store.findApiKey(keyId);
    if (!key) throw notFound('api_key_not_found', `No API key '${keyId}'.`);
    if (key.workspace_id !== p.workspaceId) throw otherWorkspace('API key');
    if (!hasRole(p.role, 'developer')) throw forbidden('insufficient_role', "Revoking API keys needs the 'developer' role or higher.");
    await this.store.revokeApiKey(p.workspaceId, keyId);
    this.log.info({ workspaceId: p.workspaceId, keyId }, 'api key revoked');
    return { status: 'revoked' as const, id: keyId };
  }

  // Operator

  listWorkspaces(params: PageParams) {
    return this.store.listWorkspaces(params).then((page) => ({ ...page, data: page.data.map(toWorkspace) }));
  }

  async getWorkspace(id: string) {
    const ws = await this.store.getWorkspace(id);
    if (!ws) throw notFound('workspace_not_found', `No workspace '${id}'.`);
    return toWorkspace(ws);
  }

  async updateWorkspace(
    id: string,
    patch: Partial<Pick<WorkspaceRow, 'name' | 'plan' | 'subscription_status' | 'credit_balance_cents' | 'concurrent_session_limit'>>,
  ) {
    const ws = await this.store.updateWorkspace(id, patch);
    if (!ws) throw notFound('workspace_not_found', `No workspace '${id}'.`);
    this.log.info({ workspaceId: id, fields: Object.keys(patch) }, 'workspace updated by operator');
    return toWorkspace(ws);
  }
}
