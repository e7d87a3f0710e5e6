/** Workspaces, users, dashboard sessions and API keys in PostgreSQL. Every query is scoped by workspace. */
import type { Knex } from 'knex';
import { conflict } from '../errors/api-error.js';
import { isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type PageParams } from '../lib/pagination.js';
import type { Role } from '../contract/principal.js';
import { compiledQuery } from '../db/compiled-query.js';

export interface WorkspaceRow {
  id: string;
  name: string;
  plan: string;
  subscription_status: 'active' | 'past_due' | 'unpaid';
  credit_balance_cents: number;
  concurrent_session_limit: number;
  created_at: Date;
}
export interface UserRow {
  id: string;
  workspace_id: string;
  email: string;
  password_hash: string;
  role: Role;
  created_at: Date;
}
export interface SessionRow {
  id: string;
  user_id: string;
  workspace_id: string;
  expires_at: Date;
  role: Role;
}
export interface ApiKeyRow {
  id: string;
  workspace_id: string;
  name: string;
  key_prefix: string;
  revoked_at: Date | null;
  last_used_at: Date | null;
  created_at: Date;
}

const emailTaken = () => conflict('email_taken', 'An account with this email already exists.', 'email');

/**
 * A realtime token is good only while the credential that minted it is: voided tokens count as used,
 * so connecting with one closes 4001. (The realtime domain's table, written here so the revocation
 * and the voiding commit together.)
 */
function voidTokensMintedBy(trx: Knex.Transaction, credentialId: string) {
  return trx('realtime_tokens').where({ minted_by: credentialId }).whereNull('used_at').update({ used_at: trx.fn.now() });
}

export class WorkspaceStore {
  // Every authenticated request runs one of these: compiled once (src/db/compiled-query.ts).
  private readonly liveSession;
  private readonly liveApiKey;

  constructor(private readonly db: Knex) {
    this.liveSession = compiledQuery<[tokenHash: string, now: Date], SessionRow>(
      db,
      (tokenHash, now) =>
        db('dashboard_sessions as s')
          .join('users as u', 'u.id', 's.user_id')
          .where('s.token_hash', tokenHash)
          .whereNull('s.revoked_at')
          .where('s.expires_at', '>', now)
          .first('s.id', 's.user_id', 's.workspace_id', 's.expires_at', 'u.role'),
      2,
    );
    this.liveApiKey = compiledQuery<[keyHash: string], Pick<ApiKeyRow, 'id' | 'workspace_id' | 'last_used_at'>>(
      db,
      (keyHash) => db('api_keys').where({ key_hash: keyHash }).whereNull('revoked_at').first('id', 'workspace_id', 'last_used_at'),
      1,
    );
  }

  async createWorkspaceWithOwner(
    ws: Omit<WorkspaceRow, 'created_at'>,
    owner: Omit<UserRow, 'created_at' | 'workspace_id' | 'role'>,
  ): Promise<{ workspace: WorkspaceRow; user: UserRow }> {
    try {
      return await this.db.transaction(async (trx) => {
        const [workspace] = await trx('workspaces').insert(ws).returning('*');
        const [user] = await trx('users')
          .insert({ ...owner, workspace_id: ws.id, role: 'owner' })
          .returning('*');
        return { workspace, user };
      });
    } catch (err) {
      if (isUniqueViolation(err, 'users_email_unique')) throw emailTaken();
      throw err;
    }
  }

  async createUser(user: Omit<UserRow, 'created_at'>): Promise<UserRow> {
    try {
      const [row] = await this.db('users').insert(user).returning('*');
      return row;
    } catch (err) {
      if (isUniqueViolation(err, 'users_email_unique')) throw emailTaken();
      throw err;
    }
  }

  findUserByEmail(email: string): Promise<UserRow | undefined> {
    return this.db('users').whereRaw('lower(email) = lower(?)', [email]).first();
  }

  listUsers(workspaceId: string): Promise<UserRow[]> {
    return this.db('users').where({ workspace_id: workspaceId }).orderBy('id', 'asc');
  }

  getWorkspace(id: string): Promise<WorkspaceRow | undefined> {
    return this.db('workspaces').where({ id }).first();
  }

  listWorkspaces(params: PageParams) {
    return paginate<WorkspaceRow, WorkspaceRow>(this.db('workspaces').select('*'), params, (r) => r);
  }

  async updateWorkspace(id: string, patch: Partial<Omit<WorkspaceRow, 'id' | 'created_at'>>): Promise<WorkspaceRow | undefined> {
    const [row] = await this.db('workspaces')
      .where({ id })
      .update({ ...patch, updated_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  async createSession(s: { id: string; token_hash: string; user_id: string; workspace_id: string; expires_at: Date }): Promise<void> {
    await this.db('dashboard_sessions').insert(s);
  }

  findLiveSession(tokenHash: string, now: Date): Promise<SessionRow | undefined> {
    return this.liveSession(tokenHash, now).then((rows) => rows[0]);
  }

  async revokeSession(id: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      await trx('dashboard_sessions').where({ id }).update({ revoked_at: trx.fn.now() });
      await voidTokensMintedBy(trx, id);
    });
  }

  async createApiKey(k: { id: string; workspace_id: string; name: string; key_hash: string; key_prefix: string; created_by: string }): Promise<ApiKeyRow> {
    const [row] = await this.db('api_keys').insert(k).returning(['id', 'workspace_id', 'name', 'key_prefix', 'revoked_at', 'last_used_at', 'created_at']);
    return row;
  }

  listApiKeys(workspaceId: string): Promise<ApiKeyRow[]> {
    return this.db('api_keys')
      .where({ workspace_id: workspaceId })
      .orderBy('id', 'desc')
      .select('id', 'workspace_id', 'name', 'key_prefix', 'revoked_at', 'last_used_at', 'created_at');
  }

  findApiKey(id: string): Promise<Pick<ApiKeyRow, 'id' | 'workspace_id'> | undefined> {
    return this.db('api_keys').where({ id }).first('id', 'workspace_id');
  }

  /** Revokes the key and voids the realtime tokens it minted that were not used yet. */
  async revokeApiKey(workspaceId: string, id: string): Promise<void> {
    await this.db.transaction(async (trx) => {
      await trx('api_keys').where({ id, workspace_id: workspaceId }).whereNull('revoked_at').update({ revoked_at: trx.fn.now() });
      await voidTokensMintedBy(trx, id);
    });
  }

  /** Whether the API key or dashboard session of this id is still good (not revoked, logged out, expired or gone). */
  async credentialLive(id: string, now: Date): Promise<boolean> {
    const key = this.db('api_keys').where({ id }).whereNull('revoked_at').select(this.db.raw('1'));
    const session = this.db('dashboard_sessions').where({ id }).whereNull('revoked_at').where('expires_at', '>', now).select(this.db.raw('1'));
    const row = await key.unionAll(session).first();
    return row !== undefined;
  }

  findLiveApiKey(keyHash: string): Promise<Pick<ApiKeyRow, 'id' | 'workspace_id' | 'last_used_at'> | undefined> {
    return this.liveApiKey(keyHash).then((rows) => rows[0]);
  }

  async touchApiKey(id: string, at: Date): Promise<void> {
    await this.db('api_keys')
      .where({ id })
      .where((q) => q.whereNull('last_used_at').orWhere('last_used_at', '<', at))
      .update({ last_used_at: at });
  }
}
