/**
 * Structured results: `npm run bench -- results`.
 *
 * What extraction costs at the end of a call: the time from hang-up (the call's `ended_at`, when the
 * service learned the media stream was over) to its `call.completed` arriving at a webhook receiver
 * in this process, for calls whose agent has an `analysis` setting (a five-field schema with a
 * pattern, an enum list and bounds, plus success criteria) against, in the same run, calls of an
 * identical agent without one (the baseline). Calls of the two agents alternate, C at a time, so
 * drift and load hit both alike. The service, the sandbox carriers (speed 4) and the sandbox voice
 * service run as processes of their own, as in the calls benchmark; every caller says the same
 * three lines and hangs up. Figures: p50/p90/p99/max of hang-up -> call.completed for each agent and
 * the difference; that the extracted data is right on every call with the setting is checked too.
 * The one step extraction adds to the end of a call is the check of the answer against the schema in
 * the schema pool's worker thread (write-up.ts); its round trip is measured alone too (in this
 * process, warm, 500 checks of the same data), against a baseline of the same check run inline with
 * a validator compiled in this thread. The load average is printed with the figures: on a shared
 * machine every thread hand-off waits for a core.
 * BENCH_RESULTS_CALLS (default 60) calls per agent, BENCH_RESULTS_CONCURRENCY (default 4).
 */
import http from 'node:http';
import { isDeepStrictEqual } from 'node:util';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { api, benchDatabase, benchWorkspace, forkChild, percentile, table, type BenchChild } from './lib.js';
import { analysisDataProblem } from '../../src/agents/analysis-check.js';
import { compileStandalone, tenantAjv } from '../../src/contract/tenant-schema.js';

const ADMIN = 'bench-operator-token-0123456789';
const root = path.resolve(import.meta.dirname, '../..');

const SCHEMA = {
  type: 'object',
  properties: {
    booked_time: { type: ['string', 'null'], format: 'date-time', description: 'The appointment the caller agreed to.' },
    lead_score: { type: 'integer', minimum: 0, maximum: 10 },
    consent: { type: 'boolean', description: 'Whether the caller agreed to be contacted again.' },
    topics: { type: 'array', items: { type: 'string', enum: ['billing', 'cleaning', 'whitening'] } },
    zip: { type: 'string', pattern: '^[0-9]{5}$' },
  },
  required: ['lead_score', 'consent'],
};
const EXPECTED = { booked_time: '2026-12-01T10:00:00Z', lead_score: 8, consent: true, topics: ['cleaning', 'billing'], zip: '94110' };
const SCRIPT = [
  { waitForAgent: true, startWithinMs: 10_000 },
  { say: 'I want to book. Booked time is 2026-12-01T10:00:00Z; lead score is 8.' },
  { waitForAgent: true, startWithinMs: 10_000 },
  { say: 'Consent: yes. Topics are cleaning and billing. Zip is 94110.' },
  { waitForAgent: true, startWithinMs: 10_000 },
  { say: 'Thank you, that is all.' },
  { waitForAgent: true, startWithinMs: 10_000 },
  { hangup: true },
];

/** Receives call.completed; resolves each conversation's arrival time (epoch ms) and payload. */
async function receiver() {
  const waiting = new Map<string, (v: { at: number; body: Record<string, any> }) => void>();
  const early = new Map<string, { at: number; body: Record<string, any> }>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      res.writeHead(200).end('ok');
      const body = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, any>;
      const id = String(body.conversation_id);
      const w = waiting.get(id);
      if (w) w({ at, body });
      else early.set(id, { at, body });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrival(id: string): Promise<{ at: number; body: Record<string, any> }> {
      const got = early.get(id);
      if (got) return Promise.resolve(got);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no call.completed for ${id}`)), 60_000);
        waiting.set(id, (v) => {
          clearTimeout(timer);
          resolve(v);
        });
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** The schema pool's round trip for one answer, against the same check inline (compiled here once). */
async function validationStep(): Promise<Record<string, string | number>> {
  const inline = compileStandalone(tenantAjv(), SCHEMA);
  const time = async (fn: () => unknown, n: number) => {
    const xs: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await fn();
      xs.push(performance.now() - t0);
    }
    return xs.sort((a, b) => a - b);
  };
  await time(() => analysisDataProblem('bench', SCHEMA, EXPECTED), 50); // the thread and its compiled validator, warm
  const pool = await time(() => analysisDataProblem('bench', SCHEMA, EXPECTED), 500);
  const here = await time(() => inline(EXPECTED), 500);
  return {
    'pool p50 ms': percentile(pool, 50).toFixed(3),
    'pool p99 ms': percentile(pool, 99).toFixed(3),
    'inline p50 ms': percentile(here, 50).toFixed(4),
    'inline p99 ms': percentile(here, 99).toFixed(4),
  };
}

export async function run(): Promise<void> {
  const perAgent = Number(process.env.BENCH_RESULTS_CALLS ?? 60);
  const concurrency = Number(process.env.BENCH_RESULTS_CONCURRENCY ?? 4);
  const db = await benchDatabase();
  const carrier = await forkChild(path.join(root, 'scripts/sandbox.ts'), ['carriers'], { PORT: '0', SPEED: '4', RING_MS: '50', LOG_LEVEL: 'silent' });
  const voice = await forkChild(path.join(root, 'scripts/sandbox.ts'), ['voice'], {
    PORT: '0',
    SPEED: '4',
    MS_PER_CHAR: '30',
    END_OF_TURN_MS: '500',
    LOG_LEVEL: 'silent',
  });
  const c = carrier.info;
  const service: BenchChild = await forkChild(path.join(import.meta.dirname, 'calls/child.ts'), ['service'], {
    VOICE_SERVICE_URL: voice.info.url,
    DATABASE_URL: db.url,
    ADMIN_TOKEN: ADMIN,
    PROVIDER_A_API_URL: c.providerAUrl,
    PROVIDER_B_API_URL: c.providerBUrl,
    CALL_SILENCE_TIMEOUT_MS: '0',
    DATABASE_POOL_MAX: '20',
    // The sandbox carriers run at speed 4: media four times faster than real time.
    CALL_AUDIO_RATE: '4',
  });
  const hooks = await receiver();
  let serial = 0;
  const number = () => `+1415${200 + Math.floor(serial / 5000)}${5000 + (serial++ % 5000)}`;
  try {
    const s = service.info.url;
    const { key } = await benchWorkspace(s, ADMIN, { name: 'Bench results', concurrentSessions: 10_000 });
    await api(s, 'POST', '/api/v1/webhooks', key, { url: hooks.url, events: ['call.completed'] });
    const agentBody = {
      name: 'Bench',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      provider_b_config: { api_key: 'KEYbench0123456789abcdef', connection_id: '1234567', phone_number: '+14155550100', public_key: c.providerBPublicKey },
    };
    const plain = (await api(s, 'POST', '/api/v1/agents', key, agentBody)).agent_id as string;
    const withSchema = (
      await api(s, 'POST', '/api/v1/agents', key, { ...agentBody, analysis: { schema: SCHEMA, success_criteria: 'The caller says "book" and "thank you".' } })
    ).agent_id as string;

    const samples: Record<'plain' | 'schema', number[]> = { plain: [], schema: [] };
    let wrong = 0;
    const one = async (kind: 'plain' | 'schema') => {
      const to = number();
      carrier.proc.send({ cmd: 'script', to, script: SCRIPT });
      const call = await api(s, 'POST', '/api/v1/calls', key, { agent_id: kind === 'plain' ? plain : withSchema, to_number: to });
      const { at, body } = await hooks.arrival(call.call_id as string);
      const record = await api(s, 'GET', `/api/v1/calls/${call.call_id}`, key);
      if (record.status !== 'completed') throw new Error(`call ${call.call_id} ended ${record.status}`);
      samples[kind].push(at - Date.parse(record.ended_at as string));
      if (kind === 'schema' && !isDeepStrictEqual(body.data, EXPECTED)) {
        if (!wrong) console.error('unexpected result:', JSON.stringify({ data: body.data, data_error: body.data_error, transcript: body.transcript }));
        wrong++;
      }
      if (kind === 'plain' && 'data' in body) wrong++;
    };
    // Warm-up: the first call of each kind starts the schema pool's thread and JIT-compiles the paths.
    await Promise.all([one('plain'), one('schema')]);
    samples.plain.length = 0;
    samples.schema.length = 0;
    wrong = 0;
    const queue: Array<'plain' | 'schema'> = Array.from({ length: perAgent * 2 }, (_, i) => (i % 2 ? 'schema' : 'plain'));
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        for (let kind = queue.shift(); kind; kind = queue.shift()) await one(kind);
      }),
    );
    const row = (name: string, xs: number[]) => {
      const sorted = xs.slice().sort((a, b) => a - b);
      return {
        agent: name,
        calls: xs.length,
        'p50 ms': percentile(sorted, 50),
        'p90 ms': percentile(sorted, 90),
        'p99 ms': percentile(sorted, 99),
        'max ms': sorted.at(-1) ?? NaN,
      };
    };
    const a = row('without analysis setting (baseline)', samples.plain);
    const b = row('with schema + success criteria', samples.schema);
    table([a, b]);
    const load = os.loadavg()[0].toFixed(1);
    console.log(
      `Hang-up -> call.completed: p50 ${b['p50 ms'] - a['p50 ms'] >= 0 ? '+' : ''}${b['p50 ms'] - a['p50 ms']} ms, p99 ${b['p99 ms'] - a['p99 ms'] >= 0 ? '+' : ''}${b['p99 ms'] - a['p99 ms']} ms with the setting; ` +
        `${concurrency} calls at a time, ${perAgent} calls per agent, alternating; data wrong or misplaced on ${wrong} call(s); load average ${load}.`,
    );
    console.log('The step extraction adds (checking the answer against the schema), alone:');
    table([await validationStep()]);
  } finally {
    await hooks.close();
    for (const p of [service]) {
      p.proc.send({ cmd: 'exit' });
      await new Promise((r) => p.proc.once('exit', r));
    }
    for (const p of [carrier, voice]) {
      p.proc.kill('SIGTERM');
      await new Promise((r) => p.proc.once('exit', r));
    }
    await db.drop();
  }
}
