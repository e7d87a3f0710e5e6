/**
 * Opens the service's database: DATABASE_URL when set, otherwise the embedded PostgreSQL in DATA_DIR.
 * Applies migrations before anything else runs.
 */
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import type { Logger } from 'pino';
import { startEmbeddedPostgres } from './embedded.js';
import { migrationSource } from './migrations/index.js';
import { migrateJobQueue } from '../jobs/queue.js';

// BIGINT and NUMERIC columns come back as JS numbers: our amounts (cents, counts) stay far below 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number(v));

export interface Database {
  knex: Knex;
  url: string;
  close(): Promise<void>;
}

const EMBEDDED_DB_NAME = 'voice_agent';

export function createKnex(url: string, pool = { min: 0, max: 10 }): Knex {
  return knexFactory({ client: 'pg', connection: url, pool, acquireConnectionTimeout: 10_000 });
}

/** The service's tables (knex migrations), then the job queue's schema (graphile-worker's own migrations). */
export async function migrate(knex: Knex, url: string): Promise<void> {
  await knex.migrate.latest({ migrationSource });
  await migrateJobQueue(url);
}

async function ensureDatabase(serverUrl: string, name: string): Promise<string> {
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`create database "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The role a connection URL logs in as (libpq's default, the OS user, is not guessed: the URL must name it). */
function roleOf(url: string): string {
  const user = decodeURIComponent(new URL(url).username);
  if (!user) throw new Error('DATABASE_URL must name its role (postgres://ROLE@host/db) when DATABASE_MIGRATION_URL is set');
  return user;
}

/**
 * What the service's own role may do, granted by the schema owner after migrating: rows of every
 * table (the migration bookkeeping only read), sequences and functions, in the service's schema and
 * the job queue's. No DDL, no ownership: a compromised service cannot drop or alter tables.
 */
async function grantServiceRole(owner: Knex, role: string): Promise<void> {
  const r = owner.client.formatter(owner.queryBuilder()).wrap(role) as string;
  for (const schema of ['public', 'graphile_worker']) {
    await owner.raw(`grant usage on schema ${schema} to ${r}`);
    await owner.raw(`grant select, insert, update, delete on all tables in schema ${schema} to ${r}`);
    await owner.raw(`grant usage, select, update on all sequences in schema ${schema} to ${r}`);
    await owner.raw(`grant execute on all functions in schema ${schema} to ${r}`);
  }
  await owner.raw(`revoke insert, update, delete on knex_migrations, knex_migrations_lock from ${r}`);
  // graphile-worker turns row-level security on for its tables, which hides every row from a role
  // that does not own them: without a policy the service's role could add no job (no call dialed).
  // Instances starting together take turns (a lock for the transaction), so none sees another's drop.
  await owner.transaction(async (trx) => {
    await trx.raw(`select pg_advisory_xact_lock(hashtext('vas_service_role_policies'))`);
    const { rows } = await trx.raw(
      `select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = 'graphile_worker' and c.relkind = 'r' and c.relrowsecurity`,
    );
    for (const { relname } of rows as Array<{ relname: string }>) {
      const table = `graphile_worker.${owner.client.formatter(owner.queryBuilder()).wrap(relname) as string}`;
      await trx.raw(`drop policy if exists service_role on ${table}`);
      await trx.raw(`create policy service_role on ${table} for all to ${r} using (true) with check (true)`);
    }
  });
}

export async function openDatabase(opts: {
  databaseUrl?: string;
  /** The schema owner's URL: migrations run with it, then DATABASE_URL's role is granted row access. */
  migrationUrl?: string;
  dataDir: string;
  embeddedPort: number;
  poolMax?: number;
  log: Logger;
}): Promise<Database> {
  let url = opts.databaseUrl;
  let stopEmbedded: (() => Promise<void>) | undefined;
  if (!url) {
    const embedded = await startEmbeddedPostgres({ dataDir: opts.dataDir, port: opts.embeddedPort, log: opts.log });
    stopEmbedded = embedded.stop;
    url = await ensureDatabase(embedded.serverUrl, EMBEDDED_DB_NAME);
  }
  const knex = createKnex(url, { min: 0, max: opts.poolMax ?? 10 });
  try {
    if (opts.migrationUrl && opts.migrationUrl !== url) {
      const owner = createKnex(opts.migrationUrl, { min: 0, max: 2 });
      try {
        await migrate(owner, opts.migrationUrl);
        await grantServiceRole(owner, roleOf(url));
      } finally {
        await owner.destroy();
      }
    } else {
      await migrate(knex, url);
    }
  } catch (err) {
    await knex.destroy();
    await stopEmbedded?.();
    throw err;
  }
  return {
    knex,
    url,
    async close() {
      await knex.destroy();
      await stopEmbedded?.();
    },
  };
}
