/**
 * The contract benchmark's bare handler: `GET /api/v1/keys` as two queries (session lookup, key list)
 * and JSON out, nothing else. Run as a script (`node bare.mjs`, DATABASE_URL set) it is the bare side
 * of contract.ts, and prints `{"url"}` once listening; layer.mjs imports its queries and app. JavaScript, not TypeScript: it runs under plain
 * node as the compiled service does, with no loader wrapping its functions.
 */
import http from 'node:http';
import { createHash } from 'node:crypto';
import Koa from 'koa';
import knexFactory from 'knex';
import { pathToFileURL } from 'node:url';

/**
 * The bare side's two queries: the service's own session lookup (src/workspaces/store.ts: the columns
 * a principal needs, and the service clock's time bound as a value), compiled once and run as a named
 * prepared statement as the service runs it (src/db/compiled-query.ts), and the key list.
 * @param {import('knex').Knex} knex
 */
export function bareQueries(knex) {
  const { sql } = knex('dashboard_sessions as s')
    .join('users as u', 'u.id', 's.user_id')
    .where('s.token_hash', '?')
    .whereNull('s.revoked_at')
    .where('s.expires_at', '>', '?')
    .first('s.id', 's.user_id', 's.workspace_id', 's.expires_at', 'u.role')
    .toSQL();
  const sessionSql = sql.replace(/limit \?$/, 'limit 1');
  return {
    /** The live session of a dashboard token, or undefined. */
    session: async (token) =>
      (await knex.raw(sessionSql, [createHash('sha256').update(token).digest('hex'), new Date()]).options({ name: 'bare_session' })).rows[0],
    keys: (workspaceId) =>
      knex('api_keys')
        .where({ workspace_id: workspaceId })
        .orderBy('id', 'desc')
        .select('id', 'workspace_id', 'name', 'key_prefix', 'revoked_at', 'last_used_at', 'created_at'),
  };
}

/** A key as the API shows it. */
export const toApiKey = (k) => ({
  id: k.id,
  name: k.name,
  key_prefix: k.key_prefix,
  revoked: k.revoked_at !== null,
  created_at: k.created_at.toISOString(),
  last_used_at: k.last_used_at?.toISOString() ?? null,
});

/** @param {import('knex').Knex} knex */
export function bareKeysApp(knex) {
  const queries = bareQueries(knex);
  const app = new Koa();
  app.use(async (ctx) => {
    const m = /^Bearer (\S+)$/.exec(ctx.get('Authorization'));
    const session = m ? await queries.session(m[1]) : undefined;
    if (!session) {
      ctx.status = 401;
      return;
    }
    ctx.body = (await queries.keys(session.workspace_id)).map(toApiKey);
  });
  return app;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const knex = knexFactory({ client: 'pg', connection: process.env.DATABASE_URL, pool: { min: 0, max: Number(process.env.POOL_MAX ?? 20) } });
  const server = http.createServer(bareKeysApp(knex).callback());
  server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })}\n`));
  process.on('SIGTERM', () => server.close(() => knex.destroy().then(() => process.exit(0))));
}
