/** MCP servers, their attachments to agents and pending OAuth states in PostgreSQL. */
import type { Knex } from 'knex';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';
import { refuseOverLimit } from '../agents/link-limit.js';
import type { McpToolInfo, McpTransport } from './client.js';

/** Most MCP servers an agent's draft links (each brings its tools to every conversation). */
export const MAX_AGENT_MCP_SERVERS = 20;

export type AuthType = 'none' | 'static' | 'oauth2';
export type OAuthStatus = 'not_applicable' | 'consent_required' | 'authorized' | 'refresh_failed';
export type ServerErrorCode = 'unreachable' | 'tls_error' | 'unauthorized' | 'protocol_error' | 'timeout' | 'consent_required';

export interface McpServerRow {
  id: string;
  workspace_id: string;
  name: string;
  url: string;
  transport: McpTransport;
  auth_type: AuthType;
  /** {<header name>: <sealed value>} */
  static_headers: Record<string, string> | null;
  oauth_client_id: string | null;
  oauth_client_secret: string | null;
  oauth_authorization_url: string | null;
  oauth_token_url: string | null;
  oauth_scopes: string[] | null;
  oauth_access_token: string | null;
  oauth_refresh_token: string | null;
  oauth_expires_at: Date | null;
  oauth_status: OAuthStatus;
  status: 'ok' | 'error';
  error_code: ServerErrorCode | null;
  error_message: string | null;
  tools: McpToolInfo[];
  tools_refreshed_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface OAuthStateRow {
  state_hash: string;
  mcp_server_id: string;
  workspace_id: string;
  code_verifier: string;
  redirect_uri: string;
  expires_at: Date;
}

/** Columns stored as jsonb need JSON text on write (knex would send a JS array as a PostgreSQL array). */
function forWrite(row: Partial<McpServerRow>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row };
  for (const col of ['static_headers', 'oauth_scopes', 'tools'] as const) {
    if (col in row) out[col] = row[col] === null ? null : JSON.stringify(row[col]);
  }
  return out;
}

export class McpStore {
  constructor(private readonly db: Knex) {}

  async insert(row: McpServerRow): Promise<McpServerRow> {
    const [created] = await this.db('mcp_servers').insert(forWrite(row)).returning('*');
    return created;
  }

  async get(id: string, trx: Knex | Knex.Transaction = this.db): Promise<McpServerRow | undefined> {
    return trx('mcp_servers').where({ id }).first();
  }

  /** The row locked until the transaction ends (token refresh runs one at a time per server). */
  async getForUpdate(trx: Knex.Transaction, id: string): Promise<McpServerRow | undefined> {
    return trx('mcp_servers').where({ id }).forUpdate().first();
  }

  async update(id: string, patch: Partial<McpServerRow>, trx: Knex | Knex.Transaction = this.db): Promise<McpServerRow | undefined> {
    const [row] = await trx('mcp_servers').where({ id }).update(forWrite(patch)).returning('*');
    return row;
  }

  async delete(workspaceId: string, id: string): Promise<boolean> {
    return (await this.db('mcp_servers').where({ id, workspace_id: workspaceId }).delete()) > 0;
  }

  list(workspaceId: string, page: PageParams): Promise<Page<McpServerRow>> {
    return paginate<McpServerRow, McpServerRow>(this.db('mcp_servers').where({ workspace_id: workspaceId }), page, (r) => r);
  }

  listForAgent(agentId: string, page: PageParams): Promise<Page<McpServerRow>> {
    const q = this.db('mcp_servers as s').join('agent_mcp_servers as a', 'a.mcp_server_id', 's.id').where('a.agent_id', agentId).select('s.*');
    return paginate<McpServerRow, McpServerRow>(q, page, (r) => r, 's.id');
  }

  async agentWorkspace(agentId: string): Promise<string | undefined> {
    const row = (await this.db('agents').where({ id: agentId }).first('workspace_id')) as { workspace_id: string } | undefined;
    return row?.workspace_id;
  }

  /** Links the server to the agent's draft, in the agent's write transaction; false when it was linked already. */
  async attach(trx: Knex, agentId: string, serverId: string, workspaceId: string): Promise<boolean> {
    const inserted = await trx('agent_mcp_servers')
      .insert({ agent_id: agentId, mcp_server_id: serverId, workspace_id: workspaceId })
      .onConflict(['agent_id', 'mcp_server_id'])
      .ignore()
      .returning('mcp_server_id');
    if (inserted.length > 0) await refuseOverLimit(trx, 'agent_mcp_servers', agentId, MAX_AGENT_MCP_SERVERS, 'MCP servers', 'mcp_server_id');
    return inserted.length > 0;
  }

  /** Unlinks the server from the agent's draft; false when it was not linked. */
  async detach(trx: Knex, agentId: string, serverId: string): Promise<boolean> {
    return (await trx('agent_mcp_servers').where({ agent_id: agentId, mcp_server_id: serverId }).delete()) > 0;
  }

  /** The workspace's servers among `ids` (a version's links) whose tools are offered: usable ones (oauth2 only once authorized). */
  async usableAmong(workspaceId: string, ids: readonly string[]): Promise<McpServerRow[]> {
    if (ids.length === 0) return [];
    return this.db('mcp_servers as s')
      .where({ 's.workspace_id': workspaceId })
      .whereIn('s.id', [...ids])
      .andWhere((q) => q.whereNot('s.auth_type', 'oauth2').orWhere('s.oauth_status', 'authorized'))
      .orderBy('s.id')
      .select('s.*');
  }

  async insertState(row: OAuthStateRow): Promise<void> {
    await this.db('mcp_oauth_states').insert(row);
  }

  /** Single use: the state is deleted as it is read. */
  async consumeState(stateHash: string): Promise<OAuthStateRow | undefined> {
    const [row] = await this.db('mcp_oauth_states').where({ state_hash: stateHash }).delete().returning('*');
    return row;
  }

  async deleteStates(serverId: string, trx: Knex | Knex.Transaction = this.db): Promise<void> {
    await trx('mcp_oauth_states').where({ mcp_server_id: serverId }).delete();
  }

  async purgeExpiredStates(now: Date): Promise<void> {
    await this.db('mcp_oauth_states').where('expires_at', '<', now).delete();
  }

  transaction<T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }
}
