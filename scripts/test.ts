/**
 * `npm test`: prepares PostgreSQL (DATABASE_URL's server, or an embedded one when it is unset), a
 * migrated template database, the API reference and the browser SDK (each rebuilt when missing or
 * stale), then runs every test file with node's test runner and prints the contract coverage report.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { createKnex, migrate } from '../src/db/database.js';
import { startEmbeddedPostgres, type EmbeddedDatabase } from '../src/db/embedded.js';
import { createLogger } from '../src/log.js';
import { printCoverage } from './contract-coverage.js';
import { buildDocs } from './build-docs.js';
import { buildSdk } from './build-sdk.js';

const root = path.resolve(import.meta.dirname, '..');
const coverageDir = path.join(root, '.contract-coverage');
/** Each file's wall time, slowest first (scripts/file-times-reporter.ts). */
const fileTimes = path.join(root, '.test-times.jsonl');
const TEMPLATE = `vas_template_${process.pid}`;

/** Run only when named: several instances behind a load balancer (`npm run test:cluster`), minutes long. */
const ON_REQUEST = ['cluster/'];

function testFiles(args: string[]): string[] {
  if (args.length) return args;
  return (fs.readdirSync(path.join(root, 'test'), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.ts') && !ON_REQUEST.some((dir) => f.startsWith(dir)))
    .map((f) => path.join('test', f))
    .sort();
}

async function query(url: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

function printSlowest(count: number): void {
  if (!fs.existsSync(fileTimes)) return;
  const lines = fs.readFileSync(fileTimes, 'utf8').trim().split('\n').filter(Boolean).slice(0, count);
  console.log(
    `\nThe ${lines.length} slowest test files (wall seconds, ${process.env.TEST_CONCURRENCY ?? 2} files at a time; all in ${path.basename(fileTimes)}):`,
  );
  for (const line of lines) {
    const { file, seconds } = JSON.parse(line) as { file: string; seconds: number };
    console.log(`  ${seconds.toFixed(1).padStart(6)}  ${path.relative(root, file)}`);
  }
}

async function main(): Promise<number> {
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');
  let embedded: EmbeddedDatabase | undefined;
  let server = process.env.DATABASE_URL;
  if (!server) {
    embedded = await startEmbeddedPostgres({ dataDir: path.join(root, '.test-data'), port: Number(process.env.TEST_EMBEDDED_PG_PORT ?? 54339), log });
    server = embedded.serverUrl;
  }
  const templateUrl = new URL(server);
  templateUrl.pathname = `/${TEMPLATE}`;
  await query(server, `drop database if exists "${TEMPLATE}" with (force)`);
  await query(server, `create database "${TEMPLATE}"`);
  const knex = createKnex(templateUrl.toString());
  await migrate(knex, templateUrl.toString());
  await knex.destroy();

  buildDocs({ onlyStale: true });
  await buildSdk({ onlyStale: true });
  fs.rmSync(coverageDir, { recursive: true, force: true });

  const files = testFiles(process.argv.slice(2));
  const code = await new Promise<number>((resolve) => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--test',
        '--test-reporter=spec',
        '--test-reporter-destination=stdout',
        '--test-reporter=./scripts/file-times-reporter.ts',
        `--test-reporter-destination=${fileTimes}`,
        `--test-concurrency=${process.env.TEST_CONCURRENCY ?? 2}`,
        ...files,
      ],
      {
        cwd: root,
        stdio: 'inherit',
        env: { ...process.env, TEST_DATABASE_SERVER_URL: server, TEST_TEMPLATE_DB: TEMPLATE, CONTRACT_COVERAGE_DIR: coverageDir, NODE_ENV: 'test' },
      },
    );
    child.on('exit', (c) => resolve(c ?? 1));
  });

  await query(server, `drop database if exists "${TEMPLATE}" with (force)`).catch(() => undefined);
  if (embedded) await embedded.stop();
  if (process.argv.length <= 2) {
    printCoverage(coverageDir);
    printSlowest(10);
  }
  return code;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
