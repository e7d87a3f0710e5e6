/**
 * One connection to a remote MCP server with the SDK's Client over Streamable HTTP or SSE, and what
 * went wrong when it fails, in the contract's words (unreachable, tls_error, unauthorized,
 * protocol_error, timeout).
 *
 * Every request of the transports goes through `guardedFetch` (the SDK transports take a `fetch`
 * option): the URL is checked right before each request and the resolved address at connect time.
 * Credentials travel as `requestInit` headers; the SDK's `authProvider` is not used because tokens
 * are ours to manage (explicit token_url, refreshed before use in oauth.ts), not discovered.
 * Listing tools opens a connection and closes it; tool calls at runtime reuse one connection per
 * server through McpSessionPool.
 */
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { guardedFetch, type FetchLike } from '../net/guarded-fetch.js';

export type McpTransport = 'sse' | 'streamable_http';
export type McpConnectErrorCode = 'unreachable' | 'tls_error' | 'unauthorized' | 'protocol_error' | 'timeout';

export interface McpEndpoint {
  url: string;
  transport: McpTransport;
  /** Sent with every request (static credentials or `Authorization: Bearer <access token>`). */
  headers: Record<string, string>;
}

export interface McpToolInfo {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export class McpConnectError extends Error {
  constructor(
    readonly code: McpConnectErrorCode,
    message: string,
    /** The HTTP status behind the failure, when there was one. */
    readonly httpStatus: number | null = null,
  ) {
    super(message);
  }
}

const TLS_CODES = /^(EPROTO|ERR_TLS_|ERR_SSL_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|ERR_OSSL_|HOSTNAME_MISMATCH)/;
const MAX_TOOL_PAGES = 50;
/** A server offering more is cut here: a voice agent cannot use thousands of tools anyway. */
const MAX_TOOLS = 500;
const MAX_DESCRIPTION_CHARS = 4000;
/** Any one HTTP response (an SSE stream counts as one) larger than this breaks the connection. */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;

interface WireFacts {
  networkError?: NodeJS.ErrnoException;
  badStatus?: number;
  contentType?: string | null;
}

function statusOf(err: unknown): number | undefined {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'number' && code >= 300 && code < 600 ? code : undefined;
}

function explain(err: unknown, facts: WireFacts, host: string, timedOut: boolean, timeoutMs: number): McpConnectError {
  if (timedOut || (err instanceof McpError && err.code === ErrorCode.RequestTimeout)) {
    return new McpConnectError('timeout', `No answer from ${host} within ${Math.round(timeoutMs / 100) / 10} seconds.`);
  }
  const net = facts.networkError;
  if (net) {
    const code = net.code ?? 'unknown';
    if (TLS_CODES.test(code)) {
      return new McpConnectError('tls_error', `The TLS handshake with ${host} failed (${code}); check the URL's scheme and port and the server's certificate.`);
    }
    if (code === 'ERR_RESPONSE_TOO_LARGE')
      return new McpConnectError(
        'protocol_error',
        `${host} sent an answer larger than ${MAX_RESPONSE_BYTES / 1024 / 1024} MB; this is not an MCP server as expected.`,
      );
    if (code === 'EBLOCKED') return new McpConnectError('unreachable', `${host} resolves to an address this service does not call.`);
    if (code === 'ECONNREFUSED') return new McpConnectError('unreachable', `Connection refused by ${host}.`);
    if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new McpConnectError('unreachable', `The host '${host}' does not resolve.`);
    return new McpConnectError('unreachable', `Could not reach ${host} (${code}).`);
  }
  const status = facts.badStatus ?? statusOf(err);
  if (status === 401 || status === 403) {
    return new McpConnectError('unauthorized', `${host} answered ${status}: the credentials were missing or refused.`, status);
  }
  if (status && status >= 500) return new McpConnectError('unreachable', `${host} answered ${status}.`, status);
  if (status)
    return new McpConnectError('protocol_error', `${host} answered HTTP ${status}; this URL does not look like an MCP endpoint for this transport.`, status);
  if (facts.contentType !== undefined && !/json|event-stream/i.test(facts.contentType ?? '')) {
    return new McpConnectError('protocol_error', `${host} answered with content type '${facts.contentType ?? 'none'}', not MCP.`);
  }
  return new McpConnectError('protocol_error', `${host} did not answer as an MCP server.`);
}

/** One MCP connection: the SDK client, what its requests saw on the wire, and a way to cut it. */
interface Session {
  client: Client;
  /** Settles when `initialize` has been answered (or failed). */
  ready: Promise<void>;
  facts: WireFacts;
  host: string;
  close(): Promise<void>;
}

function openSession(policy: OutboundPolicy, endpoint: McpEndpoint): Session {
  const url = new URL(endpoint.url);
  const facts: WireFacts = {};
  const controller = new AbortController();
  const base = guardedFetch(policy, {
    maxResponseBytes: MAX_RESPONSE_BYTES,
    onNetworkError: (e) => (facts.networkError ??= e),
    onResponse: (status, contentType) => {
      // 405: a stateless server refusing the optional GET stream, which the SDK tolerates.
      if (status >= 300 && status !== 405) facts.badStatus ??= status;
      facts.contentType = contentType;
    },
  });
  const fetchFn: FetchLike = (input, init = {}) =>
    base(input, { ...init, signal: init.signal ? AbortSignal.any([init.signal, controller.signal]) : controller.signal });
  const options = { requestInit: { headers: endpoint.headers }, fetch: fetchFn };
  const transport = endpoint.transport === 'sse' ? new SSEClientTransport(url, options) : new StreamableHTTPClientTransport(url, options);
  const client = new Client({ name: 'voice-agent-service', version: '1.0.0' });
  client.onerror = () => undefined;
  const ready = client.connect(transport);
  ready.catch(() => undefined); // awaited by every step; a failure is reported there
  const session: Session = {
    client,
    ready,
    facts,
    host: url.host,
    async close() {
      controller.abort();
      await client.close().catch(() => undefined);
    },
  };
  return session;
}

/**
 * Runs `fn` on the session within `timeoutMs`; failures become McpConnectError. On a timeout the
 * session is cut (its requests aborted), so the caller must not reuse it.
 */
async function step<T>(session: Session, timeoutMs: number, fn: (client: Client) => Promise<T>): Promise<T> {
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      void session.close();
      reject(new Error('timeout'));
    }, timeoutMs);
  });
  try {
    const work = (async () => {
      await session.ready;
      return fn(session.client);
    })();
    work.catch(() => undefined);
    return await Promise.race([work, deadline]);
  } catch (err) {
    throw err instanceof McpConnectError ? err : explain(err, session.facts, session.host, timedOut, timeoutMs);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Connects, runs `fn` with the initialised client, and closes. The whole exchange has `timeoutMs`.
 * Failures are thrown as McpConnectError.
 */
export async function withMcpClient<T>(policy: OutboundPolicy, endpoint: McpEndpoint, timeoutMs: number, fn: (client: Client) => Promise<T>): Promise<T> {
  const session = openSession(policy, endpoint);
  try {
    return await step(session, timeoutMs, fn);
  } finally {
    await session.close();
  }
}

/** `initialize` then every page of `tools/list`. */
export function listTools(policy: OutboundPolicy, endpoint: McpEndpoint, timeoutMs: number): Promise<McpToolInfo[]> {
  return withMcpClient(policy, endpoint, timeoutMs, async (client) => {
    const tools: McpToolInfo[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page++) {
      const res = await client.listTools(cursor ? { cursor } : undefined, { timeout: timeoutMs });
      for (const t of res.tools.slice(0, MAX_TOOLS - tools.length)) {
        tools.push({
          name: t.name,
          description: (t.description ?? '').slice(0, MAX_DESCRIPTION_CHARS),
          input_schema: (t.inputSchema ?? { type: 'object' }) as Record<string, unknown>,
        });
      }
      cursor = res.nextCursor;
      if (!cursor || tools.length >= MAX_TOOLS) break;
    }
    return tools;
  });
}

export interface McpToolCallResult {
  isError: boolean;
  /** The tool's structured result, or its text content joined, or its content blocks. */
  result: unknown;
}

function resultOf(res: { content?: unknown; structuredContent?: unknown }): unknown {
  if (res.structuredContent !== undefined) return res.structuredContent;
  const content = Array.isArray(res.content) ? (res.content as Array<{ type?: string; text?: string }>) : [];
  if (content.every((c) => c.type === 'text')) return content.map((c) => c.text ?? '').join('\n');
  return content;
}

async function callOn(client: Client, name: string, args: Record<string, unknown>, timeoutMs: number): Promise<McpToolCallResult> {
  try {
    const res = (await client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs })) as {
      content?: unknown;
      structuredContent?: unknown;
      isError?: boolean;
    };
    return { isError: res.isError === true, result: resultOf(res) };
  } catch (err) {
    // The server refused the call (unknown tool, invalid arguments): an outcome of the tool, not of the connection.
    if (err instanceof McpError && err.code !== ErrorCode.RequestTimeout && err.code !== ErrorCode.ConnectionClosed)
      return { isError: true, result: err.message };
    throw err;
  }
}

export function callTool(
  policy: OutboundPolicy,
  endpoint: McpEndpoint,
  name: string,
  args: Record<string, unknown>,
  timeoutMs: number,
): Promise<McpToolCallResult> {
  return withMcpClient(policy, endpoint, timeoutMs, (client) => callOn(client, name, args, timeoutMs));
}

/**
 * Connections kept open between the tool calls of a conversation, so a call costs one round trip
 * instead of a new `initialize` each time. One session per server, keyed by everything it was opened
 * with (URL, transport, credentials: a refreshed token opens a new one); closed after `idleMs` unused,
 * on any failure, and on shutdown. A failure on a reused session is retried once on a fresh one (the
 * server may have restarted or expired the session).
 */
export class McpSessionPool {
  private readonly sessions = new Map<string, { fingerprint: string; session: Session; idle?: NodeJS.Timeout }>();

  constructor(
    private readonly policy: OutboundPolicy,
    private readonly idleMs: number,
  ) {}

  async callTool(serverId: string, endpoint: McpEndpoint, name: string, args: Record<string, unknown>, timeoutMs: number): Promise<McpToolCallResult> {
    const fingerprint = createHash('sha256')
      .update(JSON.stringify([endpoint.url, endpoint.transport, Object.entries(endpoint.headers).sort()]))
      .digest('hex');
    for (let attempt = 0; ; attempt++) {
      let entry = this.sessions.get(serverId);
      if (entry && entry.fingerprint !== fingerprint) {
        this.drop(serverId, entry.session);
        entry = undefined;
      }
      const reused = entry !== undefined;
      if (!entry) {
        entry = { fingerprint, session: openSession(this.policy, endpoint) };
        this.sessions.set(serverId, entry);
      }
      clearTimeout(entry.idle);
      const { session } = entry;
      try {
        const result = await step(session, timeoutMs, (client) => callOn(client, name, args, timeoutMs));
        this.keep(serverId, session);
        return result;
      } catch (err) {
        this.drop(serverId, session);
        if (reused && attempt === 0 && !(err instanceof McpConnectError && err.code === 'timeout')) continue;
        throw err;
      }
    }
  }

  private keep(serverId: string, session: Session): void {
    const entry = this.sessions.get(serverId);
    if (!entry || entry.session !== session) return;
    clearTimeout(entry.idle);
    entry.idle = setTimeout(() => this.drop(serverId, session), this.idleMs);
    entry.idle.unref();
  }

  private drop(serverId: string, session: Session): void {
    const entry = this.sessions.get(serverId);
    if (entry?.session === session) {
      clearTimeout(entry.idle);
      this.sessions.delete(serverId);
    }
    void session.close();
  }

  /** Forgets a server's session (it was updated or deleted). */
  forget(serverId: string): void {
    const entry = this.sessions.get(serverId);
    if (entry) this.drop(serverId, entry.session);
  }

  async closeAll(): Promise<void> {
    const all = [...this.sessions.values()];
    this.sessions.clear();
    for (const e of all) clearTimeout(e.idle);
    await Promise.all(all.map((e) => e.session.close()));
  }

  get size(): number {
    return this.sessions.size;
  }
}
