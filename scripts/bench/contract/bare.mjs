/**
 * The contract benchmark's bare handler: `GET /api/v1/keys` as two queries (session lookup, key list)
 * and JSON out, nothing else. Run as a script (`node bare.mjs`, DATABASE_URL set) it is the bare side
 * of contract.ts, and prints `{"url"}` once listening. JavaScript, not TypeScript: it runs under plain
 * node as the compiled service does, with no loader wrapping its functions.
 */
import http from 'node:http';
import { createHash } from 'node:crypto';
import Koa from 'koa';
import knexFactory from 'knex';

/** @param {import('knex').Knex} knex */
function bareKeysApp(knex) {
  // The service's own session lookup (src/workspaces/store.ts: the columns a principal needs, and the
  // service clock's time bound as a value), compiled once and run as a named prepared statement as the
  // service runs it (src/db/compiled-query.ts): the two sides do the same queries the same way.
  const { sql: sessionSql } = knex('dashboard_sessions as s')
    .join('users as u', 'u.id', 's.user_id')
    .where('s.token_hash', '?')
    .whereNull('s.revoked_at')
    .where('s.expires_at', '>', '?')
    .first('s.id', 's.user_id', 's.workspace_id', 's.expires_at', 'u.role')
    .toSQL();
  const sessionQuery = sessionSql.replace(/limit \?$/, 'limit 1');
  const app = new Koa();
  app.use(async (ctx) => {
    const m = /^Bearer (\S+)$/.exec(ctx.get('Authorization'));
    const session = m
      ? (await knex.raw(sessionQuery, [createHash('sha256').update(m[1]).digest('hex'), new Date()]).options({ name: 'bare_session' })).rows[0]
      : undefined;
    if (!session) {
      ctx.status = 401;
      return;
    }
    const rows = await knex('api_keys')
      .where({ workspace_id: session.workspace_id })
      .orderBy('id', 'desc')
      .select('id', 'workspace_id', 'name', 'key_prefix', 'revoked_at', 'last_used_at', 'created_at');
    ctx.body = rows.map((k) => ({
      id: k.id,
      name: k.name,
      key_prefix: k.key_prefix,
      revoked: k.revoked_at !== null,
      created_at: k.created_at.toISOString(),
      last_used_at: k.last_used_at?.toISOString() ?? null,
    }));
  });
  return app;
}

const knex = knexFactory({ client: 'pg', connection: process.env.DATABASE_URL, pool: { min: 0, max: Number(process.env.POOL_MAX ?? 20) } });
const server = http.createServer(bareKeysApp(knex).callback());
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` })}\n`));
process.on('SIGTERM', () => server.close(() => knex.destroy().then(() => process.exit(0))));
