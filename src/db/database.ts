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

export async function openDatabase(opts: {
  databaseUrl?: string;
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
    await migrate(knex, url);
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
