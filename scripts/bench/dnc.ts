/**
 * The do-not-call check (issue 36): `npm run bench -- dnc`. The service runs in this process
 * (startBenchService), with two workspaces of one agent each: one whose do-not-call list holds
 * BENCH_DNC_LIST (1,000,000) numbers, written straight into the table (generate_series, as an import
 * would leave them), and one with an empty list, the same-run baseline.
 *
 * 1. create: BENCH_DNC_RECIPIENTS (100,000) recipients made into batches through `POST /api/v1/batches`
 *    (BENCH_DNC_BATCH, 10,000 a batch, the API's maximum), scheduled an hour ahead so nothing dials;
 *    BENCH_DNC_LISTED_SHARE (1%) of them are on the long list (skipped there with `do_not_call`), the
 *    rest are not. The time to create all of them, per workspace, BENCH_DNC_REPS times after a warm-up,
 *    the two workspaces interleaved; and, timed inside the same creations, the time the do-not-call
 *    lookup took (the service's `listedAmong`, wrapped): on a busy machine the creations' own spread is
 *    wider than the 5% asked about, the lookup's share of each creation is not. The list is vacuumed
 *    and analyzed after it is written, as autovacuum would after a bulk import.
 *    Goal: the list adds under 5% to batch creation time.
 * 2. check: the lookup alone (`DoNotCallService.listedAmong`) of the same 100,000 numbers against each
 *    list, and of a dispatch round's claim (BATCH_DISPATCH_CHUNK numbers), as a round runs it.
 */
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { api, benchDatabase, percentile, startBenchService, table } from './lib.js';
import { loadConfig } from '../../src/config.js';

const ADMIN = 'bench-operator-token-0123456789';
const num = (name: string, dflt: number) => Number(process.env[name] ?? dflt);
const r1 = (n: number) => Math.round(n * 10) / 10;

/** Valid North American numbers the destination policy takes, distinct: area code x exchange 200-999 x line. */
const AREA_CODES = [415, 212, 312, 617, 206, 303, 404, 512, 602, 702, 801, 919, 213, 310, 408, 510, 650, 707, 916, 925];
const LINES = ['1234', '2345', '3456', '4567', '5678', '6789', '7890'];
function recipientNumbers(n: number): string[] {
  return Array.from({ length: n }, (_, k) => {
    const line = LINES[Math.floor(k / (AREA_CODES.length * 800))];
    return `+1${AREA_CODES[Math.floor(k / 800) % AREA_CODES.length]}${200 + (k % 800)}${line}`;
  });
}

async function workspace(base: string, name: string): Promise<{ id: string; key: string; agentId: string }> {
  const signup = await api(base, 'POST', '/api/v1/auth/signup', null, {
    email: `bench-dnc-${name}-${Date.now()}@example.com`,
    password: 'correct-horse-battery',
    workspace_name: name,
  });
  const key = (await api(base, 'POST', '/api/v1/keys', signup.session_token, { name: 'bench' })).key as string;
  await api(base, 'PATCH', `/admin/v1/workspaces/${signup.workspace.id}`, ADMIN, { plan: 'enterprise', credit_balance_cents: 1_000_000_000 });
  const agent = await api(base, 'POST', '/api/v1/agents', key, {
    name: 'Bench',
    provider_a_config: { account_sid: `AC${randomBytes(16).toString('hex')}`, auth_token: randomBytes(16).toString('hex'), phone_number: '+14155550100' },
  });
  return { id: signup.workspace.id, key, agentId: agent.agent_id };
}

export async function run(): Promise<void> {
  const listSize = num('BENCH_DNC_LIST', 1_000_000);
  const n = num('BENCH_DNC_RECIPIENTS', 100_000);
  const perBatch = num('BENCH_DNC_BATCH', 10_000);
  const reps = num('BENCH_DNC_REPS', 3);
  const share = num('BENCH_DNC_LISTED_SHARE', 0.01);
  // Every rep leaves n recipients waiting and n / perBatch batches open in each workspace.
  const env = {
    ADMIN_TOKEN: ADMIN,
    BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE: String(n * (reps + 2)),
    BATCH_MAX_OPEN_PER_WORKSPACE: String(Math.ceil(n / perBatch) * (reps + 2)),
  };
  const db = await benchDatabase();
  const service = await startBenchService(db.url, env);
  try {
    const base = service.url;
    const listed = await workspace(base, 'Listed');
    const empty = await workspace(base, 'Empty');
    const numbers = recipientNumbers(n);
    const onList = numbers.filter((_, i) => i % Math.round(1 / share) === 0);
    const t0 = performance.now();
    // The long list: numbers +1 900 000 0000 upward (none a recipient), then the recipients to skip.
    await service.db.knex.raw(
      `insert into do_not_call_entries (id, workspace_id, number, source)
       select 'dnc_' || lpad(i::text, 26, '0'), ?, '+1' || (9000000000 + i)::text, 'csv' from generate_series(1, ?) as i`,
      [listed.id, listSize - onList.length],
    );
    for (const number of onList) await service.doNotCall.optOut(listed.id, number, `call_${'0'.repeat(26)}`);
    await service.db.knex.raw('vacuum analyze do_not_call_entries');
    console.log(`list of ${listSize.toLocaleString()} numbers written in ${r1((performance.now() - t0) / 1000)} s`);

    // The lookup's own time inside each creation, per workspace.
    const lookupMs = new Map<string, number>();
    const listedAmong = service.doNotCall.listedAmong.bind(service.doNotCall);
    service.doNotCall.listedAmong = async (workspaceId, sample, trx) => {
      const s = performance.now();
      try {
        return await listedAmong(workspaceId, sample, trx);
      } finally {
        lookupMs.set(workspaceId, (lookupMs.get(workspaceId) ?? 0) + performance.now() - s);
      }
    };
    const later = () => new Date(Date.now() + 3600_000).toISOString();
    const shares: Record<string, number[]> = { Listed: [], Empty: [] };
    const createAll = async (w: { id: string; key: string; agentId: string }, expectSkipped: number, name?: 'Listed' | 'Empty') => {
      lookupMs.set(w.id, 0);
      const start = performance.now();
      let skipped = 0;
      for (let i = 0; i < n; i += perBatch) {
        const recipients = numbers.slice(i, i + perBatch).map((to_number) => ({ to_number }));
        const batch = await api(base, 'POST', '/api/v1/batches', w.key, { agent_id: w.agentId, name: `Bench ${i}`, recipients, scheduled_at: later() });
        skipped += (batch.skipped.items as Array<{ reason: string }>).filter((item) => item.reason === 'do_not_call').length;
      }
      if (skipped !== expectSkipped) throw new Error(`skipped ${skipped} as do_not_call, expected ${expectSkipped}`);
      const ms = performance.now() - start;
      if (name) shares[name].push((lookupMs.get(w.id)! / ms) * 100);
      return ms;
    };
    const withList: number[] = [];
    const withoutList: number[] = [];
    await createAll(listed, onList.length);
    await createAll(empty, 0);
    for (let r = 0; r < reps; r++) {
      withoutList.push(await createAll(empty, 0, 'Empty'));
      withList.push(await createAll(listed, onList.length, 'Listed'));
    }
    const median = (xs: number[]) =>
      percentile(
        [...xs].sort((a, b) => a - b),
        50,
      );
    table([
      {
        case: `create ${n.toLocaleString()} recipients, empty list (baseline)`,
        reps,
        'p50 s': r1(median(withoutList) / 1000),
        'max s': r1(Math.max(...withoutList) / 1000),
      },
      {
        case: `create ${n.toLocaleString()} recipients, ${listSize.toLocaleString()}-number list`,
        reps,
        'p50 s': r1(median(withList) / 1000),
        'max s': r1(Math.max(...withList) / 1000),
      },
    ]);
    const added = (median(withList) / median(withoutList) - 1) * 100;
    console.log(`creation with the list against without: ${r1(added)}% (p50 against p50)`);
    const percents = (xs: number[]) => xs.map((x) => `${r1(x)}%`).join(', ');
    console.log(
      `the lookup's share of each creation (timed inside it): ${percents(shares.Listed)} with the ${listSize.toLocaleString()}-number list, ${percents(shares.Empty)} with the empty one (goal: under 5% added)`,
    );

    const chunk = loadConfig({ DATABASE_URL: 'postgres://x/y', ...env }).BATCH_DISPATCH_CHUNK;
    const timeCheck = async (workspaceId: string, sample: string[], times: number) => {
      const out: number[] = [];
      for (let i = 0; i < times; i++) {
        const s = performance.now();
        await service.doNotCall.listedAmong(workspaceId, sample);
        out.push(performance.now() - s);
      }
      return out.sort((a, b) => a - b);
    };
    const rows: Array<Record<string, string | number>> = [];
    for (const [label, sample, times] of [
      [`${n.toLocaleString()} numbers`, numbers, 5],
      [`a dispatch claim (${chunk} numbers)`, numbers.slice(0, chunk), 200],
    ] as const) {
      for (const [list, w] of [
        ['empty', empty],
        [listSize.toLocaleString(), listed],
      ] as const) {
        const t = await timeCheck(w.id, [...sample], times);
        rows.push({ check: label, list, times, 'p50 ms': r1(percentile(t, 50)), 'p99 ms': r1(percentile(t, 99)) });
      }
    }
    table(rows);
    console.log(
      `load average at the end: ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} on ${os.cpus().length} CPUs`,
    );
  } finally {
    await service.close();
    await db.drop();
  }
}
