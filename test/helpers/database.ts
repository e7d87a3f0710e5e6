/**
 * Test databases: every test service gets a database of its own, copied from a migrated template that
 * the test runner prepares (or created and migrated here when a file runs on its own).
 * The server is TEST_DATABASE_SERVER_URL (set by scripts/test.ts: DATABASE_URL's server, or an
 * embedded PostgreSQL when DATABASE_URL is unset).
 */
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { createKnex, migrate } from '../../src/db/database.js';

export function serverUrl(): string {
  const url = process.env.TEST_DATABASE_SERVER_URL ?? process.env.DATABASE_URL;
  if (!url) throw new Error('Run the tests with `npm test` (it sets TEST_DATABASE_SERVER_URL), or set DATABASE_URL.');
  return url;
}

export function databaseUrl(name: string, base = serverUrl()): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createTestDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `vas_test_${randomBytes(6).toString('hex')}`;
  const template = process.env.TEST_TEMPLATE_DB;
  await admin((c) => c.query(template ? `create database "${name}" template "${template}"` : `create database "${name}"`));
  const url = databaseUrl(name);
  if (!template) {
    const knex = createKnex(url);
    await migrate(knex, url);
    await knex.destroy();
  }
  return {
    url,
    drop: () => admin((c) => c.query(`drop database if exists "${name}" with (force)`)).then(() => undefined),
  };
}
