/**
 * MCP servers: the rules of connect, update, refresh, delete, the OAuth consent flow, attachment to
 * agents, and what calls use at runtime (toolsForServers, callTool).
 *
 * A connection attempt never fails the request: its outcome is stored in `status`/`error` and the
 * last successful tool listing is kept. Credentials (static headers, client secret, tokens) are sealed
 * at rest and never leave this module except as request headers to the server they belong to.
 */
import { sameOrigin } from '../net/same-origin.js';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import type { SecretBox } from '../crypto/secrets.js';
import { badGateway, badRequest, conflict, notFound, otherWorkspace, unprocessable } from '../errors/api-error.js';
import { newId } from '../lib/ids.js';
import { sha256Hex } from '../lib/tokens.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import { listTools, McpConnectError, McpSessionPool, type McpEndpoint, type McpToolInfo, type McpTransport } from './client.js';
import { buildAuthorizationUrl, exchangeCode, refreshTokens, TokenRequestError, type OAuthClientSettings } from './oauth.js';
import type { AuthType, McpServerRow, McpStore, OAuthStatus, ServerErrorCode } from './store.js';
import type { AgentLinkWriter } from '../agents/service.js';
import { isForeignKeyViolation } from '../lib/db-errors.js';

export interface McpServiceConfig {
  connectTimeoutMs: number;
  stateTtlMs: number;
  refreshMarginMs: number;
  /** Tool-call connections unused this long are closed. */
  sessionIdleMs: number;
  /** `{PUBLIC_BASE_URL}/api/v1/mcp-servers/oauth/callback` */
  redirectUri: string;
}

/** Exactly one of the two (the contract's minProperties/maxProperties). */
type StaticAuthInput = { bearer_token?: string; headers?: Record<string, string> };
interface OAuthConfigInput {
  client_id?: string;
  client_secret?: string | null;
  authorization_url?: string;
  token_url?: string;
  scopes?: string[];
}
export interface McpServerCreateInput {
  name: string;
  url: string;
  transport?: McpTransport;
  auth_type?: AuthType;
  static_auth?: StaticAuthInput;
  oauth_config?: OAuthConfigInput;
}
export type McpServerUpdateInput = Partial<McpServerCreateInput>;

export interface McpServer {
  mcp_server_id: string;
  name: string;
  url: string;
  transport: McpTransport;
  auth_type: AuthType;
  static_auth: { has_credentials: boolean; header_names: string[] } | null;
  oauth_config: {
    client_id: string;
    has_client_secret: boolean;
    authorization_url: string;
    token_url: string;
    scopes: string[];
    expires_at: string | null;
  } | null;
  oauth_status: OAuthStatus;
  status: 'ok' | 'error';
  error: { code: ServerErrorCode; message: string } | null;
  usable: boolean;
  tools: McpToolInfo[];
  tools_refreshed_at: string | null;
  created_at: string;
  updated_at: string;
}

/** A tool an agent offers from one of its attached, usable MCP servers. */
export interface AgentMcpTool {
  mcpServerId: string;
  serverName: string;
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export interface McpToolOutcome {
  ok: boolean;
  result: unknown;
  /** Why the call failed, for the model and the call record; null when ok. */
  error: string | null;
  /** not_found, consent_required, tool_error, unreachable, tls_error, unauthorized, protocol_error, timeout, internal_error */
  errorCode: string | null;
}

/** What a connection attempt changes on the row. */
type Outcome = Pick<McpServerRow, 'status' | 'error_code' | 'error_message'> & Partial<Pick<McpServerRow, 'tools' | 'tools_refreshed_at' | 'oauth_status'>>;

const CONSENT_REQUIRED = 'Complete the OAuth consent flow to use this server: call POST /api/v1/mcp-servers/{mcp_server_id}/oauth/authorize and open the URL.';
/** Headers the transport itself sets; a static credential may not replace them. */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'accept',
  'connection',
  'transfer-encoding',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
]);

const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function isUsable(row: Pick<McpServerRow, 'auth_type' | 'oauth_status'>): boolean {
  return row.auth_type !== 'oauth2' || row.oauth_status === 'authorized';
}

/** Contexts the secrets of an MCP server are sealed for: they open only in their own server's field. */
const serverContext = (serverId: string, field: 'oauth_client_secret' | 'oauth_access_token' | 'oauth_refresh_token') => `mcp_servers/${serverId}/${field}`;
const headerContext = (serverId: string, name: string) => `mcp_servers/${serverId}/static_headers/${name.toLowerCase()}`;
/** A consent's PKCE verifier opens only with the state it was issued with. */
const stateContext = (stateHash: string) => `mcp_oauth_states/${stateHash}`;

export class McpService {
  /** Refreshes in flight per server, so parallel uses of one server refresh once. */
  private readonly refreshing = new Map<string, Promise<McpServerRow>>();
  /** Connections reused between the tool calls of conversations. */
  private readonly sessions: McpSessionPool;

  constructor(
    private readonly store: McpStore,
    private readonly secrets: SecretBox,
    private readonly outbound: OutboundPolicy,
    private readonly clock: Clock,
    private readonly config: McpServiceConfig,
    private readonly log: Logger,
    /** Attaching and detaching are writes to the agent (agents/service.ts). */
    private readonly agents: AgentLinkWriter,
  ) {
    this.sessions = new McpSessionPool(outbound, config.sessionIdleMs);
  }

  /** Closes the connections kept for tool calls (shutdown). */
  close(): Promise<void> {
    return this.sessions.closeAll();
  }

  toPublic(row: McpServerRow): McpServer {
    const headers = row.static_headers ?? {};
    return {
      mcp_server_id: row.id,
      name: row.name,
      url: row.url,
      transport: row.transport,
      auth_type: row.auth_type,
      static_auth: row.auth_type === 'static' ? { has_credentials: Object.keys(headers).length > 0, header_names: Object.keys(headers) } : null,
      oauth_config:
        row.auth_type === 'oauth2'
          ? {
              client_id: row.oauth_client_id ?? '',
              has_client_secret: Boolean(row.oauth_client_secret),
              authorization_url: row.oauth_authorization_url ?? '',
              token_url: row.oauth_token_url ?? '',
              scopes: row.oauth_scopes ?? [],
              expires_at: iso(row.oauth_expires_at),
            }
          : null,
      oauth_status: row.oauth_status,
      status: row.status,
      error: row.status === 'error' && row.error_code ? { code: row.error_code, message: row.error_message ?? '' } : null,
      usable: isUsable(row),
      tools: row.tools,
      tools_refreshed_at: iso(row.tools_refreshed_at),
      created_at: iso(row.created_at)!,
      updated_at: iso(row.updated_at)!,
    };
  }

  // ---- the developer API -------------------------------------------------------------------------

  async connect(workspaceId: string, input: McpServerCreateInput): Promise<McpServer> {
    const authType = input.auth_type ?? 'none';
    if (authType === 'static' && !input.static_auth)
      throw unprocessable('static_auth_required', "auth_type 'static' needs 'static_auth' with a bearer_token or headers.", 'static_auth');
    if (authType === 'oauth2' && !input.oauth_config)
      throw unprocessable('oauth_config_required', "auth_type 'oauth2' needs 'oauth_config' with client_id, authorization_url and token_url.", 'oauth_config');
    if (input.static_auth && authType !== 'static')
      throw unprocessable('auth_config_mismatch', `'static_auth' is only accepted with auth_type 'static' (this request has '${authType}').`, 'static_auth');
    if (input.oauth_config && authType !== 'oauth2')
      throw unprocessable('auth_config_mismatch', `'oauth_config' is only accepted with auth_type 'oauth2' (this request has '${authType}').`, 'oauth_config');
    const id = newId('mcpServer');
    const staticHeaders = input.static_auth ? this.sealStaticAuth(id, input.static_auth) : null;
    const oauth = authType === 'oauth2' ? this.completeOAuthSettings({}, input.oauth_config!) : null;
    await this.checkOutboundUrl(input.url, 'url');
    if (oauth) await this.checkOAuthUrls(oauth);

    const now = this.clock.now();
    const row: McpServerRow = {
      id,
      workspace_id: workspaceId,
      name: input.name,
      url: input.url,
      transport: input.transport ?? 'streamable_http',
      auth_type: authType,
      static_headers: staticHeaders,
      oauth_client_id: oauth?.client_id ?? null,
      oauth_client_secret: oauth?.client_secret ? this.secrets.seal(oauth.client_secret, serverContext(id, 'oauth_client_secret')) : null,
      oauth_authorization_url: oauth?.authorization_url ?? null,
      oauth_token_url: oauth?.token_url ?? null,
      oauth_scopes: oauth ? oauth.scopes : null,
      oauth_access_token: null,
      oauth_refresh_token: null,
      oauth_expires_at: null,
      oauth_status: authType === 'oauth2' ? 'consent_required' : 'not_applicable',
      status: 'error',
      error_code: null,
      error_message: null,
      tools: [],
      tools_refreshed_at: null,
      created_at: now,
      updated_at: now,
    };
    const outcome = await this.attempt(row);
    const created = await this.store.insert({ ...row, ...outcome });
    this.log.info({ mcpServerId: created.id, workspaceId, status: created.status, errorCode: created.error_code }, 'mcp server connected');
    return this.toPublic(created);
  }

  async list(workspaceId: string, page: PageParams): Promise<Page<McpServer>> {
    const rows = await this.store.list(workspaceId, page);
    return { ...rows, data: rows.data.map((r) => this.toPublic(r)) };
  }

  async get(workspaceId: string, id: string): Promise<McpServer> {
    return this.toPublic(await this.load(workspaceId, id));
  }

  async update(workspaceId: string, id: string, input: McpServerUpdateInput): Promise<McpServer> {
    const row = await this.load(workspaceId, id);
    if (Object.keys(input).length === 0) return this.toPublic(row);
    const authType = input.auth_type ?? row.auth_type;
    if (input.static_auth && authType !== 'static')
      throw unprocessable(
        'auth_config_mismatch',
        `'static_auth' is only accepted with auth_type 'static' (the server would have '${authType}').`,
        'static_auth',
      );
    if (input.oauth_config && authType !== 'oauth2')
      throw unprocessable(
        'auth_config_mismatch',
        `'oauth_config' is only accepted with auth_type 'oauth2' (the server would have '${authType}').`,
        'oauth_config',
      );
    if (authType === 'static' && row.auth_type !== 'static' && !input.static_auth) {
      throw unprocessable('static_auth_required', "Switching to auth_type 'static' needs 'static_auth' with a bearer_token or headers.", 'static_auth');
    }
    if (authType === 'oauth2' && row.auth_type !== 'oauth2' && !input.oauth_config) {
      throw unprocessable(
        'oauth_config_required',
        "Switching to auth_type 'oauth2' needs 'oauth_config' with client_id, authorization_url and token_url.",
        'oauth_config',
      );
    }
    // Credentials are bound to the origin they were given for (src/net/same-origin.ts).
    const urlMoved = input.url !== undefined && !sameOrigin(input.url, row.url);
    if (urlMoved && authType === 'static' && !input.static_auth) {
      throw unprocessable(
        'static_auth_required',
        "Moving the server to another origin needs 'static_auth' again: stored credentials are never sent to a new host.",
        'static_auth',
      );
    }
    const staticHeaders = input.static_auth ? this.sealStaticAuth(row.id, input.static_auth) : null;
    let oauth: ReturnType<McpService['completeOAuthSettings']> | null = null;
    if (authType === 'oauth2' && input.oauth_config) {
      const stored = row.auth_type === 'oauth2' ? this.storedOAuthInput(row) : {};
      oauth = this.completeOAuthSettings(stored, input.oauth_config);
    }
    if (input.url !== undefined) await this.checkOutboundUrl(input.url, 'url');
    if (oauth) await this.checkOAuthUrls(oauth, input.oauth_config);

    const patch: Partial<McpServerRow> = {};
    if (input.name !== undefined) patch.name = input.name;
    if (input.url !== undefined) patch.url = input.url;
    if (input.transport !== undefined) patch.transport = input.transport;
    patch.auth_type = authType;
    if (authType !== 'static') patch.static_headers = null;
    else if (staticHeaders) patch.static_headers = staticHeaders;
    let dropStates = false;
    if (authType !== 'oauth2') {
      Object.assign(patch, {
        oauth_client_id: null,
        oauth_client_secret: null,
        oauth_authorization_url: null,
        oauth_token_url: null,
        oauth_scopes: null,
        oauth_access_token: null,
        oauth_refresh_token: null,
        oauth_expires_at: null,
        oauth_status: 'not_applicable',
      });
      dropStates = row.auth_type === 'oauth2';
    } else if (oauth) {
      Object.assign(patch, {
        oauth_client_id: oauth.client_id,
        oauth_client_secret: oauth.client_secret ? this.secrets.seal(oauth.client_secret, serverContext(row.id, 'oauth_client_secret')) : null,
        oauth_authorization_url: oauth.authorization_url,
        oauth_token_url: oauth.token_url,
        oauth_scopes: oauth.scopes,
      });
      if (row.auth_type !== 'oauth2')
        Object.assign(patch, { oauth_access_token: null, oauth_refresh_token: null, oauth_expires_at: null, oauth_status: 'consent_required' });
      // A consent started with the old client settings must not complete with the new ones.
      dropStates = true;
    }
    const tokenUrlMoved = Boolean(oauth && row.auth_type === 'oauth2' && row.oauth_token_url && !sameOrigin(oauth.token_url, row.oauth_token_url));
    // Keep the sealed secret when the update leaves it out, unless the token endpoint moved to another origin.
    if (oauth && input.oauth_config && !('client_secret' in input.oauth_config) && row.auth_type === 'oauth2')
      patch.oauth_client_secret = tokenUrlMoved ? null : row.oauth_client_secret;
    // Tokens issued for the old server or by the old token endpoint are not sent to a new one: consent again.
    if (authType === 'oauth2' && row.auth_type === 'oauth2' && (urlMoved || tokenUrlMoved)) {
      Object.assign(patch, { oauth_access_token: null, oauth_refresh_token: null, oauth_expires_at: null, oauth_status: 'consent_required' });
      dropStates = true;
    }

    const reconnect = (['url', 'transport', 'auth_type', 'static_auth', 'oauth_config'] as const).some((k) => k in input);
    const next = { ...row, ...patch };
    const outcome = reconnect ? await this.attempt(next) : {};
    if (dropStates) await this.store.deleteStates(row.id);
    const updated = await this.store.update(row.id, { ...patch, ...outcome, updated_at: this.clock.now() });
    this.sessions.forget(row.id);
    if (!updated) throw notFound('mcp_server_not_found', `No MCP server with id '${id}'.`, 'mcp_server_id');
    return this.toPublic(updated);
  }

  async delete(workspaceId: string, id: string): Promise<{ status: 'deleted'; mcp_server_id: string }> {
    const row = await this.load(workspaceId, id);
    await this.store.delete(workspaceId, row.id);
    this.sessions.forget(row.id);
    return { status: 'deleted', mcp_server_id: row.id };
  }

  async refresh(workspaceId: string, id: string): Promise<McpServer> {
    const row = await this.load(workspaceId, id);
    const outcome = await this.attempt(row);
    const updated = await this.store.update(row.id, { ...outcome, updated_at: this.clock.now() });
    return this.toPublic(updated ?? { ...row, ...outcome });
  }

  async authorize(workspaceId: string, id: string): Promise<{ authorization_url: string; state_expires_at: string }> {
    const row = await this.load(workspaceId, id);
    if (row.auth_type !== 'oauth2')
      throw conflict('not_oauth2', `This server uses auth_type '${row.auth_type}'; OAuth authorization applies only to 'oauth2'.`);
    const state = `st_${randomBytes(32).toString('base64url')}`;
    const { url, codeVerifier } = await buildAuthorizationUrl(this.settings(row), this.config.redirectUri, state);
    const now = this.clock.now();
    const expiresAt = new Date(now.getTime() + this.config.stateTtlMs);
    await this.store.purgeExpiredStates(now);
    await this.store.insertState({
      state_hash: sha256Hex(state),
      mcp_server_id: row.id,
      workspace_id: row.workspace_id,
      code_verifier: this.secrets.seal(codeVerifier, stateContext(sha256Hex(state))),
      redirect_uri: this.config.redirectUri,
      expires_at: expiresAt,
    });
    return { authorization_url: url, state_expires_at: expiresAt.toISOString() };
  }

  /** The redirect target of the consent screen; answers the HTML page's text. */
  async completeAuthorization(query: { state?: string; code?: string; error?: string; error_description?: string }): Promise<string> {
    const invalidState = () =>
      badRequest('invalid_oauth_state', 'This authorization link has expired or was already used; start the authorization again.', 'state');
    if (!query.state) throw invalidState();
    const pending = await this.store.consumeState(sha256Hex(query.state));
    if (!pending || new Date(pending.expires_at).getTime() <= this.clock.now().getTime()) throw invalidState();
    const row = await this.store.get(pending.mcp_server_id);
    if (!row || row.auth_type !== 'oauth2') throw invalidState();
    if (query.error) {
      const reason = /^[\w.-]{1,64}$/.test(query.error) ? query.error : 'an error';
      throw badRequest('oauth_consent_denied', `The provider reported '${reason}': consent was not given, so the server still needs authorization.`, 'error');
    }
    if (!query.code) throw badRequest('missing_authorization_code', "The provider's redirect carries no authorization code.", 'code');
    let tokens;
    try {
      tokens = await exchangeCode(
        this.outbound,
        this.settings(row),
        query.code,
        this.secrets.open(pending.code_verifier, stateContext(sha256Hex(query.state))),
        pending.redirect_uri,
        this.config.connectTimeoutMs,
      );
    } catch (err) {
      if (err instanceof TokenRequestError) throw badGateway('oauth_token_exchange_failed', err.message);
      throw err;
    }
    const now = this.clock.now();
    const authorized = await this.store.update(row.id, {
      ...this.sealTokens(row.id, tokens, null, now),
      oauth_status: 'authorized',
      updated_at: now,
    });
    const outcome = await this.attempt(authorized!);
    const done = await this.store.update(row.id, { ...outcome, updated_at: this.clock.now() });
    this.log.info({ mcpServerId: row.id, workspaceId: row.workspace_id, status: done?.status }, 'mcp server authorized');
    const name = escapeHtml(row.name);
    return `<!DOCTYPE html><html><head><meta charset="utf-8"><title>Connected</title></head><body><h1>${name} is connected</h1><p>You can close this window.</p></body></html>`;
  }

  /** Links the server to the agent's draft: a write to the agent (the next version, `If-Match`); answers the agent's ETag too. */
  async attach(workspaceId: string, agentId: string, id: string, ifMatch?: string): Promise<{ server: McpServer; etag: string }> {
    await this.checkAgent(workspaceId, agentId);
    const row = await this.load(workspaceId, id);
    const etag = await this.agents.changeLinks(workspaceId, agentId, ifMatch, async (trx) => {
      try {
        return await this.store.attach(trx, agentId, row.id, workspaceId);
      } catch (err) {
        // Deleted since it was loaded.
        if (isForeignKeyViolation(err)) throw notFound('mcp_server_not_found', `No MCP server with id '${id}'.`, 'mcp_server_id');
        throw err;
      }
    });
    return { server: this.toPublic(row), etag };
  }

  async detach(
    workspaceId: string,
    agentId: string,
    id: string,
    ifMatch?: string,
  ): Promise<{ result: { status: 'detached'; mcp_server_id: string }; etag: string }> {
    await this.checkAgent(workspaceId, agentId);
    const row = await this.load(workspaceId, id);
    const etag = await this.agents.changeLinks(workspaceId, agentId, ifMatch, (trx) => this.store.detach(trx, agentId, row.id));
    return { result: { status: 'detached', mcp_server_id: row.id }, etag };
  }

  async listForAgent(workspaceId: string, agentId: string, page: PageParams): Promise<Page<McpServer>> {
    await this.checkAgent(workspaceId, agentId);
    const rows = await this.store.listForAgent(agentId, page);
    return { ...rows, data: rows.data.map((r) => this.toPublic(r)) };
  }

  // ---- at runtime (the ToolRunner) -----------------------------------------------------------------

  /** The tools of the usable servers among `serverIds` (what a version links), as last listed; deleted servers are skipped. */
  async toolsForServers(workspaceId: string, serverIds: readonly string[]): Promise<AgentMcpTool[]> {
    const rows = await this.store.usableAmong(workspaceId, serverIds);
    return rows.flatMap((r) =>
      r.tools.map((t) => ({ mcpServerId: r.id, serverName: r.name, name: t.name, description: t.description, inputSchema: t.input_schema })),
    );
  }

  /** Calls one tool; never throws: a failure is part of the outcome. */
  async callTool(
    workspaceId: string,
    mcpServerId: string,
    toolName: string,
    args: Record<string, unknown>,
    opts: { timeoutMs: number },
  ): Promise<McpToolOutcome> {
    const fail = (code: string, message: string): McpToolOutcome => ({ ok: false, result: null, error: message, errorCode: code });
    try {
      let row = await this.store.get(mcpServerId);
      if (!row || row.workspace_id !== workspaceId) return fail('not_found', `No MCP server with id '${mcpServerId}' in this workspace.`);
      if (!isUsable(row)) return fail('consent_required', 'The MCP server needs OAuth consent before its tools can be called.');
      for (let attempt = 0; ; attempt++) {
        if (row.auth_type === 'oauth2') {
          row = await this.freshTokens(row, attempt > 0);
          if (!isUsable(row) || !row.oauth_access_token)
            return fail('consent_required', 'The OAuth token could not be refreshed; the server needs consent again.');
        }
        try {
          const res = await this.sessions.callTool(row.id, this.endpoint(row), toolName, args, opts.timeoutMs);
          if (!res.isError) return { ok: true, result: res.result, error: null, errorCode: null };
          const text = typeof res.result === 'string' ? res.result : JSON.stringify(res.result);
          return { ok: false, result: res.result, error: (text || 'The tool reported an error.').slice(0, 1000), errorCode: 'tool_error' };
        } catch (err) {
          if (!(err instanceof McpConnectError)) throw err;
          if (err.code === 'unauthorized' && row.auth_type === 'oauth2' && row.oauth_refresh_token && attempt === 0) continue;
          return fail(err.code, err.message);
        }
      }
    } catch (err) {
      this.log.error({ err, mcpServerId }, 'mcp tool call failed');
      return fail('internal_error', 'The MCP tool call failed unexpectedly.');
    }
  }

  // ---- internals -----------------------------------------------------------------------------------

  private async load(workspaceId: string, id: string): Promise<McpServerRow> {
    const row = await this.store.get(id);
    if (!row) throw notFound('mcp_server_not_found', `No MCP server with id '${id}'.`, 'mcp_server_id');
    if (row.workspace_id !== workspaceId) throw otherWorkspace('MCP server');
    return row;
  }

  private async checkAgent(workspaceId: string, agentId: string): Promise<void> {
    const owner = await this.store.agentWorkspace(agentId);
    if (!owner) throw notFound('agent_not_found', `No agent with id '${agentId}'.`, 'agent_id');
    if (owner !== workspaceId) throw otherWorkspace('agent');
  }

  /** Write-time URL check: a malformed or blocked URL is refused; one that does not resolve now is kept (and reported unreachable). */
  private checkOutboundUrl(url: string, param: string): Promise<void> {
    return checkTargetUrl(this.outbound, url, param, { acceptUnresolvable: true });
  }

  private async checkOAuthUrls(s: { authorization_url: string; token_url: string }, changed?: OAuthConfigInput): Promise<void> {
    if (!changed || changed.authorization_url !== undefined) await this.checkOutboundUrl(s.authorization_url, 'oauth_config.authorization_url');
    if (!changed || changed.token_url !== undefined) await this.checkOutboundUrl(s.token_url, 'oauth_config.token_url');
  }

  private sealStaticAuth(serverId: string, input: StaticAuthInput): Record<string, string> {
    if (input.bearer_token !== undefined) return { Authorization: this.secrets.seal(`Bearer ${input.bearer_token}`, headerContext(serverId, 'Authorization')) };
    const out: Record<string, string> = {};
    for (const [name, value] of Object.entries(input.headers ?? {})) {
      if (RESERVED_HEADERS.has(name.toLowerCase())) {
        throw unprocessable('reserved_header', `The header '${name}' is set by the MCP transport and cannot be a credential.`, `static_auth.headers.${name}`);
      }
      out[name] = this.secrets.seal(value, headerContext(serverId, name));
    }
    return out;
  }

  private storedOAuthInput(row: McpServerRow): OAuthConfigInput {
    return {
      client_id: row.oauth_client_id ?? undefined,
      client_secret: row.oauth_client_secret ? this.secrets.open(row.oauth_client_secret, serverContext(row.id, 'oauth_client_secret')) : null,
      authorization_url: row.oauth_authorization_url ?? undefined,
      token_url: row.oauth_token_url ?? undefined,
      scopes: row.oauth_scopes ?? [],
    };
  }

  /** Merges the update onto the stored settings; the three URLs and the client id must end up present. */
  private completeOAuthSettings(stored: OAuthConfigInput, input: OAuthConfigInput) {
    const merged = { ...stored, ...input };
    for (const field of ['client_id', 'authorization_url', 'token_url'] as const) {
      if (!merged[field]) throw unprocessable('oauth_config_required', `'oauth_config.${field}' is required for auth_type 'oauth2'.`, `oauth_config.${field}`);
    }
    return {
      client_id: merged.client_id!,
      client_secret: merged.client_secret ?? null,
      authorization_url: merged.authorization_url!,
      token_url: merged.token_url!,
      scopes: merged.scopes ?? [],
    };
  }

  private settings(row: McpServerRow): OAuthClientSettings {
    return {
      clientId: row.oauth_client_id ?? '',
      clientSecret: row.oauth_client_secret ? this.secrets.open(row.oauth_client_secret, serverContext(row.id, 'oauth_client_secret')) : null,
      authorizationUrl: row.oauth_authorization_url ?? '',
      tokenUrl: row.oauth_token_url ?? '',
      scopes: row.oauth_scopes ?? [],
      resource: row.url,
    };
  }

  private sealTokens(
    serverId: string,
    tokens: { accessToken: string; refreshToken: string | null; expiresIn: number | null },
    keepRefresh: string | null,
    now: Date,
  ): Partial<McpServerRow> {
    return {
      oauth_access_token: this.secrets.seal(tokens.accessToken, serverContext(serverId, 'oauth_access_token')),
      oauth_refresh_token: tokens.refreshToken ? this.secrets.seal(tokens.refreshToken, serverContext(serverId, 'oauth_refresh_token')) : keepRefresh,
      oauth_expires_at: tokens.expiresIn !== null ? new Date(now.getTime() + tokens.expiresIn * 1000) : null,
    };
  }

  private endpoint(row: McpServerRow): McpEndpoint {
    const headers: Record<string, string> = {};
    if (row.auth_type === 'static')
      for (const [name, sealed] of Object.entries(row.static_headers ?? {})) headers[name] = this.secrets.open(sealed, headerContext(row.id, name));
    if (row.auth_type === 'oauth2' && row.oauth_access_token)
      headers.Authorization = `Bearer ${this.secrets.open(row.oauth_access_token, serverContext(row.id, 'oauth_access_token'))}`;
    return { url: row.url, transport: row.transport, headers };
  }

  /**
   * The row with a token that is not about to expire: refreshed (refresh_token grant) when it expires
   * within the margin, or always when `force` (the server refused the current one). One refresh per
   * server at a time: in this process through a shared promise, across instances through a row lock.
   */
  private freshTokens(row: McpServerRow, force: boolean): Promise<McpServerRow> {
    const due = (r: McpServerRow) =>
      r.oauth_expires_at !== null && new Date(r.oauth_expires_at).getTime() - this.config.refreshMarginMs <= this.clock.now().getTime();
    if (row.oauth_status !== 'authorized' || (!force && !due(row))) return Promise.resolve(row);
    const running = this.refreshing.get(row.id);
    if (running) return running;
    const seenToken = row.oauth_access_token;
    const work = this.store
      .transaction(async (trx) => {
        const current = await this.store.getForUpdate(trx, row.id);
        if (!current || current.oauth_status !== 'authorized') return current ?? row;
        if (current.oauth_access_token !== seenToken && !due(current)) return current;
        const now = this.clock.now();
        const expired = current.oauth_expires_at !== null && new Date(current.oauth_expires_at).getTime() <= now.getTime();
        if (!current.oauth_refresh_token) {
          if (!expired && !force) return current;
          return (await this.store.update(
            current.id,
            {
              oauth_status: 'refresh_failed',
              status: 'error',
              error_code: 'consent_required',
              error_message: 'The access token expired and the provider gave no refresh token; authorize again.',
              updated_at: now,
            },
            trx,
          ))!;
        }
        try {
          const tokens = await refreshTokens(
            this.outbound,
            this.settings(row),
            this.secrets.open(current.oauth_refresh_token, serverContext(current.id, 'oauth_refresh_token')),
            this.config.connectTimeoutMs,
          );
          return (await this.store.update(current.id, { ...this.sealTokens(current.id, tokens, current.oauth_refresh_token, now), updated_at: now }, trx))!;
        } catch (err) {
          if (!(err instanceof TokenRequestError)) throw err;
          if (err.kind === 'refused') {
            this.log.warn({ mcpServerId: current.id }, 'oauth token refresh refused');
            return (await this.store.update(
              current.id,
              {
                oauth_status: 'refresh_failed',
                status: 'error',
                error_code: 'consent_required',
                error_message: `${err.message} Authorize again.`,
                updated_at: now,
              },
              trx,
            ))!;
          }
          // The provider is unavailable: keep the tokens; a token that is still valid is used as it is.
          return current;
        }
      })
      .finally(() => this.refreshing.delete(row.id));
    this.refreshing.set(row.id, work);
    return work;
  }

  /** One connection attempt (refreshing an expiring OAuth token first); its outcome, never an exception. */
  private async attempt(row: McpServerRow): Promise<Outcome> {
    if (row.auth_type === 'oauth2' && row.oauth_status !== 'authorized') {
      const message = row.oauth_status === 'refresh_failed' ? 'The provider refused to refresh the token; authorize again.' : CONSENT_REQUIRED;
      return { status: 'error', error_code: 'consent_required', error_message: message };
    }
    let current = row;
    for (let attempt = 0; ; attempt++) {
      if (current.auth_type === 'oauth2') {
        const fresh = await this.freshTokens(current, attempt > 0);
        // Only the token state comes from the stored row: `current` may carry an update not yet written.
        current = {
          ...current,
          oauth_access_token: fresh.oauth_access_token,
          oauth_refresh_token: fresh.oauth_refresh_token,
          oauth_expires_at: fresh.oauth_expires_at,
          oauth_status: fresh.oauth_status,
        };
        if (current.oauth_status !== 'authorized') {
          return {
            status: 'error',
            error_code: 'consent_required',
            error_message: fresh.error_message ?? CONSENT_REQUIRED,
            oauth_status: current.oauth_status,
          };
        }
      }
      try {
        const tools = await listTools(this.outbound, this.endpoint(current), this.config.connectTimeoutMs);
        return { status: 'ok', error_code: null, error_message: null, tools, tools_refreshed_at: this.clock.now() };
      } catch (err) {
        if (!(err instanceof McpConnectError)) throw err;
        if (err.code === 'unauthorized' && current.auth_type === 'oauth2' && current.oauth_refresh_token && attempt === 0) continue;
        return { status: 'error', error_code: err.code, error_message: err.message };
      }
    }
  }
}
