/** Runs the service as a real process, from its sources or compiled (the way `npm start` does). */
import { after } from 'node:test';
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { productionStart } from '../../scripts/production-start.js';

const root = path.resolve(import.meta.dirname, '../..');

/**
 * Services started and not yet exited. A test failing between a start and its stop would leave its
 * service running, holding the test file's process (and the whole suite) open: killed once the file's
 * tests are over.
 */
const running = new Set<ChildProcess>();
after(() => {
  for (const child of running) child.kill('SIGKILL');
});

export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((r) => child.once('exit', (code) => r(code)));
}

/**
 * Starts the service (from its sources through tsx, or `compiled`: `npm start`'s command, node's flags
 * included, on the output of `npm run build`); resolves once it listens, rejects (with its output) if it exits first.
 * A restart on a fixed port (its PUBLIC_BASE_URL, which carriers call back, names the port) can find the
 * port held for a moment by another process's outbound socket, which the kernel assigns from the same
 * ephemeral range: such a start is tried again, for up to 10 s.
 */
export async function startProcess(env: Record<string, string>, opts: { compiled?: boolean } = {}): Promise<ServiceProcess> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await startOnce(env, opts);
    } catch (err) {
      const portInUse = env.PORT && env.PORT !== '0' && /EADDRINUSE/.test(String((err as Error).message));
      if (!portInUse || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

function startOnce(env: Record<string, string>, opts: { compiled?: boolean }): Promise<ServiceProcess> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['DATABASE_URL', 'TEST_DATABASE_SERVER_URL', 'NODE_TEST_CONTEXT'].includes(k)));
  const production = productionStart();
  const child = spawn(process.execPath, opts.compiled ? [...production.nodeFlags, production.script] : ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env: { ...clean, NODE_ENV: 'development', LOG_LEVEL: 'info', OVERLOAD_LOOP_DELAY_MS: '0', OVERLOAD_DB_WAITING: '0', HOST: '127.0.0.1', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  child.once('exit', () => running.delete(child));
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const onData = () => {
      const m = /Voice agent service on (http:\/\/\S+)/.exec(out);
      if (!m) return;
      child.stdout!.off('data', onData);
      resolve({
        child,
        url: m[1],
        output: () => out,
        async stop(signal = 'SIGTERM') {
          child.kill(signal);
          return exited(child);
        },
      });
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`service exited with ${code} before listening:\n${out}`)));
  });
}

/** Timings for crash tests: calls ring briefly, a dead instance's calls count as orphaned after 2 s, jobs poll fast. */
export const CRASH_TIMINGS: Record<string, string> = {
  CALL_RING_TIMEOUT_S: '5',
  CALL_DIAL_GRACE_MS: '500',
  CALL_ORPHAN_AFTER_MS: '2000',
  CALL_HEARTBEAT_MS: '300',
  JOBS_POLL_INTERVAL_MS: '200',
  VOICE_SANDBOX_SPEED: '2',
  // The test's sandbox carriers run at speed 2: media twice as fast as real time.
  CALL_AUDIO_RATE: '2',
  VOICE_SANDBOX_MS_PER_CHAR: '30',
};

/**
 * The environment of a service process on `databaseUrl` and its own port, talking to carriers at the
 * given base URLs (sandbox carriers living in the test's process), plus `extra`.
 */
export async function processEnv(
  databaseUrl: string,
  dataDir: string,
  carriers: { providerAUrl: string; providerBUrl: string },
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  const port = await freePort();
  return {
    DATABASE_URL: databaseUrl,
    DATA_DIR: dataDir,
    PORT: String(port),
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    PROVIDER_A_API_URL: carriers.providerAUrl,
    PROVIDER_B_API_URL: carriers.providerBUrl,
    // A service process the machine held still reads the frames the carriers sent meanwhile all at
    // once: room for a stall of seconds before they count as a flood and are dropped (unrecorded).
    CALL_AUDIO_BURST_MS: '10000',
    ...extra,
  };
}

/** Signs up over HTTP and creates an API key: the workspace, its dashboard session and the key's auth header. */
export async function signupWithKey(
  http: {
    post(path: string): {
      send(body: object): PromiseLike<{ status: number; body: any }>;
      set(name: string, value: string): { send(body: object): PromiseLike<{ status: number; body: any }> };
    };
  },
  workspaceName: string,
): Promise<{ workspaceId: string; sessionToken: string; key: string; auth: { Authorization: string } }> {
  const signup = await http.post('/api/v1/auth/signup').send({
    email: `${workspaceName.toLowerCase().replace(/\W+/g, '-')}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.com`,
    password: 'long-enough-pw',
    workspace_name: workspaceName,
  });
  if (signup.status !== 201) throw new Error(`signup: ${signup.status} ${JSON.stringify(signup.body)}`);
  const created = await http.post('/api/v1/keys').set('Authorization', `Bearer ${signup.body.session_token}`).send({ name: 'k' });
  if (created.status !== 201) throw new Error(`key: ${created.status} ${JSON.stringify(created.body)}`);
  const key = created.body.key as string;
  return { workspaceId: signup.body.workspace.id as string, sessionToken: signup.body.session_token as string, key, auth: { Authorization: `Bearer ${key}` } };
}
