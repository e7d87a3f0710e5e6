/**
 * Boots the real service in-process on a random port of 127.0.0.1 with its own database, the response
 * contract check enforced, and logs captured (tests can scan them for secrets).
 */
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import supertest from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';
import { startService, type RunningService } from '../../src/service.js';
import type { Clock } from '../../src/lib/clock.js';
import type { BudgetClock } from '../../src/lib/budget.js';
import { createTestDatabase } from './database.js';

export const ADMIN_TOKEN = 'test-operator-token-0123456789';

/** One SECRETS_KEY for the test services of a process: instances a test starts on one database must share it. */
export const TEST_SECRETS_KEY = randomBytes(32).toString('base64');

/**
 * What every service a test starts in-process needs, whichever database it runs on: test files run side
 * by side on two loaded cores and one PostgreSQL server.
 */
export const SHARED_MACHINE_ENV = {
  // No refusals for a slow loop or a busy pool unless a test asks (overload.test.ts): a loaded CI
  // machine otherwise turns a test's request into a 503 "at capacity".
  OVERLOAD_LOOP_DELAY_MS: '0',
  OVERLOAD_DB_WAITING: '0',
  // Many services share the test server's connections (max_connections is 100 by default).
  DATABASE_POOL_MAX: '10',
  JOBS_CONCURRENCY: '4',
} as const;

export interface TestService {
  url: string;
  http: ReturnType<typeof supertest>;
  service: RunningService;
  /** Every log line the service wrote, as text. */
  logs: string[];
  close(): Promise<void>;
}

export async function startTestService(
  env: Record<string, string> = {},
  opts: { clock?: Clock; recordingClock?: Clock; budgetClock?: BudgetClock } = {},
): Promise<TestService> {
  const db = await createTestDatabase();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-test-'));
  const config = loadConfig({
    NODE_ENV: 'test',
    DATABASE_URL: db.url,
    DATA_DIR: dataDir,
    SECRETS_KEY: TEST_SECRETS_KEY,
    PORT: '0',
    HOST: '127.0.0.1',
    // debug, so the tests that scan logs for secrets also see what only debug logging would write.
    LOG_LEVEL: 'debug',
    ...SHARED_MACHINE_ENV,
    CONTRACT_CHECK: 'enforce',
    CONTRACT_COVERAGE_DIR: process.env.CONTRACT_COVERAGE_DIR ?? '',
    ADMIN_TOKEN,
    SHUTDOWN_GRACE_MS: '2000',
    // Closing a test service ends what is still live at once (tests that drain set their own).
    SHUTDOWN_DRAIN_MS: '0',
    AUTH_RATE_LIMIT_PER_MINUTE: '10000',
    // Tests send whole clips of speech at once, faster than real time; the budget's own test sets it small.
    REALTIME_AUDIO_BURST_MS: '60000',
    ...env,
  });
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(chunk.toString());
      cb();
    },
  });
  const service = await startService(config, createLogger(config.LOG_LEVEL, sink), opts);
  return {
    url: service.url,
    http: supertest(service.url),
    service,
    logs,
    async close() {
      await service.close();
      await db.drop();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A counter's value on the service's `/metrics` for exactly these labels (0 while never counted). */
export async function metricValue(t: TestService, name: string, labels: Record<string, string>): Promise<number> {
  const res = await t.http.get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  const wanted = Object.entries(labels)
    .map(([k, v]) => `${k}="${v}"`)
    .sort()
    .join(',');
  for (const line of res.text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)$/.exec(line);
    if (m && m[1] === name && m[2].split(',').sort().join(',') === wanted) return Number(m[3]);
  }
  return 0;
}
