/**
 * Real local peers for the MCP tests: an MCP server built with the SDK's server classes that speaks
 * Streamable HTTP (`/mcp`) and SSE (`/sse` + `/messages`), optionally requiring a bearer token; and
 * a small OAuth 2.0 authorization server (authorization code with PKCE S256, refresh tokens).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { SSEServerTransport } from '@modelcontextprotocol/sdk/server/sse.js';

async function listen(server: http.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

function closer(server: http.Server): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
}

export interface McpPeerRequest {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
}

export interface McpPeer {
  url: string;
  /** `${url}/mcp` (Streamable HTTP) */
  streamableUrl: string;
  /** `${url}/sse` */
  sseUrl: string;
  requests: McpPeerRequest[];
  /** Tool calls the peer answered: [name, args]. */
  calls: Array<[string, unknown]>;
  /** Replace the tools offered from the next connection on. */
  setTools(names: string[]): void;
  /** Ends every open SSE session (as a restarted server would have forgotten them). */
  dropSessions(): void;
  close(): Promise<void>;
}

export interface McpPeerOptions {
  /** When set, every request must carry `Authorization: Bearer <t>` with accept(t) true; else 401. */
  acceptBearer?: (token: string) => boolean;
  /** When set, every request must carry this header with this value; else 401. */
  requireHeader?: [string, string];
}

export async function startMcpPeer(opts: McpPeerOptions = {}): Promise<McpPeer> {
  let toolNames = ['lookup_order', 'add'];
  const requests: McpPeerRequest[] = [];
  const calls: Array<[string, unknown]> = [];
  const sseTransports = new Map<string, SSEServerTransport>();
  const sseResponses = new Set<http.ServerResponse>();

  const build = () => {
    const server = new McpServer({ name: 'test-peer', version: '1.0.0' });
    if (toolNames.includes('lookup_order')) {
      server.registerTool(
        'lookup_order',
        { description: 'Returns the shipping status of an order.', inputSchema: { order_id: z.string() } },
        async ({ order_id }) => {
          calls.push(['lookup_order', { order_id }]);
          return { content: [{ type: 'text', text: `Order ${order_id} has shipped.` }] };
        },
      );
    }
    if (toolNames.includes('add')) {
      server.registerTool('add', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
        calls.push(['add', { a, b }]);
        return { content: [{ type: 'text', text: String(a + b) }] };
      });
    }
    for (const extra of toolNames.filter((n) => n !== 'lookup_order' && n !== 'add')) {
      server.registerTool(extra, { description: `The ${extra} tool.` }, async () => {
        calls.push([extra, {}]);
        return { content: [{ type: 'text', text: 'sorry' }], isError: true };
      });
    }
    return server;
  };

  const httpServer = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://peer');
    requests.push({ method: req.method ?? '', path: url.pathname, headers: req.headers });
    const auth = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (opts.acceptBearer && !(auth && opts.acceptBearer(auth))) {
      res.writeHead(401, { 'WWW-Authenticate': 'Bearer', 'Content-Type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    if (opts.requireHeader && req.headers[opts.requireHeader[0].toLowerCase()] !== opts.requireHeader[1]) {
      res.writeHead(401, { 'Content-Type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    void (async () => {
      if (url.pathname === '/mcp') {
        // Stateless Streamable HTTP: a server and a transport per request.
        const server = build();
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res);
      } else if (url.pathname === '/sse' && req.method === 'GET') {
        const transport = new SSEServerTransport('/messages', res);
        sseTransports.set(transport.sessionId, transport);
        sseResponses.add(res);
        res.on('close', () => {
          sseTransports.delete(transport.sessionId);
          sseResponses.delete(res);
        });
        await build().connect(transport);
      } else if (url.pathname === '/messages' && req.method === 'POST') {
        const transport = sseTransports.get(url.searchParams.get('sessionId') ?? '');
        if (!transport) res.writeHead(404).end('unknown session');
        else await transport.handlePostMessage(req, res);
      } else {
        res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not found"}');
      }
    })().catch(() => res.destroy());
  });
  const port = await listen(httpServer);
  const base = `http://127.0.0.1:${port}`;
  return {
    url: base,
    streamableUrl: `${base}/mcp`,
    sseUrl: `${base}/sse`,
    requests,
    calls,
    setTools: (names) => (toolNames = names),
    dropSessions: () => {
      sseTransports.clear();
      for (const res of sseResponses) res.end();
    },
    close: closer(httpServer),
  };
}

/** A server that answers every request with `handler` (non-MCP endpoints, slow peers). */
export async function startPlainPeer(handler: http.RequestListener): Promise<{ url: string; port: number; close(): Promise<void> }> {
  const server = http.createServer(handler);
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, port, close: closer(server) };
}

/** A port on 127.0.0.1 where nothing listens. */
export async function closedPort(): Promise<number> {
  const server = http.createServer();
  const port = await listen(server);
  await closer(server)();
  return port;
}

export interface OAuthPeer {
  url: string;
  authorizationUrl: string;
  tokenUrl: string;
  clientId: string;
  clientSecret: string;
  /** Every access token ever issued and not yet replaced by a refresh. */
  isValidAccessToken(token: string): boolean;
  /** Every token issued (access and refresh), for scanning logs and responses. */
  issued: string[];
  grants: Array<{ grant_type: string; params: Record<string, string>; clientAuth: 'basic' | 'post' | 'none' }>;
  authorizeRequests: URLSearchParams[];
  options: { expiresIn: number; refuseRefresh: boolean; deny: boolean };
  close(): Promise<void>;
}

const b64url = (buf: Buffer) => buf.toString('base64url');

export async function startOAuthPeer(opts: { expiresIn?: number } = {}): Promise<OAuthPeer> {
  const clientId = 'voice-agents-test';
  const clientSecret = `cs_${randomBytes(12).toString('hex')}`;
  const codes = new Map<string, { challenge: string; redirectUri: string; clientId: string }>();
  const refreshTokens = new Set<string>();
  const accessTokens = new Set<string>();
  const issued: string[] = [];
  const grants: OAuthPeer['grants'] = [];
  const authorizeRequests: URLSearchParams[] = [];
  const options = { expiresIn: opts.expiresIn ?? 3600, refuseRefresh: false, deny: false };

  const issue = () => {
    const access = `at_${randomBytes(16).toString('hex')}`;
    const refresh = `rt_${randomBytes(16).toString('hex')}`;
    accessTokens.add(access);
    refreshTokens.add(refresh);
    issued.push(access, refresh);
    return { access_token: access, token_type: 'Bearer', expires_in: options.expiresIn, refresh_token: refresh };
  };
  const json = (res: http.ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' }).end(JSON.stringify(body));

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://auth');
    if (req.method === 'GET' && url.pathname === '/authorize') {
      const q = url.searchParams;
      authorizeRequests.push(q);
      const redirect = q.get('redirect_uri');
      if (
        q.get('response_type') !== 'code' ||
        q.get('client_id') !== clientId ||
        q.get('code_challenge_method') !== 'S256' ||
        !q.get('code_challenge') ||
        !redirect
      ) {
        return json(res, 400, { error: 'invalid_request' });
      }
      const target = new URL(redirect);
      target.searchParams.set('state', q.get('state') ?? '');
      if (options.deny) {
        target.searchParams.set('error', 'access_denied');
        target.searchParams.set('error_description', 'The user declined.');
      } else {
        const code = `code_${randomBytes(12).toString('hex')}`;
        codes.set(code, { challenge: q.get('code_challenge')!, redirectUri: redirect, clientId });
        target.searchParams.set('code', code);
      }
      res.writeHead(302, { Location: target.href }).end();
      return;
    }
    if (req.method === 'POST' && url.pathname === '/token') {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const params = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
        let clientAuth: 'basic' | 'post' | 'none' = 'none';
        let id = params.client_id;
        let secret = params.client_secret;
        const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
        if (basic) {
          const [u, p] = Buffer.from(basic, 'base64').toString('utf8').split(':').map(decodeURIComponent);
          [id, secret, clientAuth] = [u, p, 'basic'];
        } else if (secret) clientAuth = 'post';
        grants.push({ grant_type: params.grant_type, params, clientAuth });
        if (id !== clientId || secret !== clientSecret) return json(res, 401, { error: 'invalid_client' });
        if (params.grant_type === 'authorization_code') {
          const pending = codes.get(params.code);
          codes.delete(params.code);
          if (!pending || pending.redirectUri !== params.redirect_uri) return json(res, 400, { error: 'invalid_grant' });
          const challenge = b64url(
            createHash('sha256')
              .update(params.code_verifier ?? '')
              .digest(),
          );
          if (challenge !== pending.challenge) return json(res, 400, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
          return json(res, 200, issue());
        }
        if (params.grant_type === 'refresh_token') {
          if (options.refuseRefresh || !refreshTokens.has(params.refresh_token)) return json(res, 400, { error: 'invalid_grant' });
          refreshTokens.delete(params.refresh_token);
          return json(res, 200, issue());
        }
        return json(res, 400, { error: 'unsupported_grant_type' });
      });
      return;
    }
    json(res, 404, { error: 'not_found' });
  });
  const port = await listen(server);
  const base = `http://127.0.0.1:${port}`;
  return {
    url: base,
    authorizationUrl: `${base}/authorize`,
    tokenUrl: `${base}/token`,
    clientId,
    clientSecret,
    isValidAccessToken: (t) => accessTokens.has(t),
    issued,
    grants,
    authorizeRequests,
    options,
    close: closer(server),
  };
}
