/**
 * What a developer may read of the workspace's metering (issue 23): its usage by day and by agent
 * (`GET /api/v1/usage`, from `usage_records`, which admission writes once per billed conversation) and
 * its limits with their current use (`GET /api/v1/limits`: concurrency slots, credit and plan minutes
 * with what live reservations hold, prices and caps of the deployment). Reads only: nothing here
 * writes. No Koa here; errors come from the catalogue.
 *
 * The destination policy and the web-session creation counts belong to other rooms (destinations,
 * realtime); the assembly hands them in as functions (`LimitSources`), so this room imports neither.
 */
import type { Knex } from 'knex';
import { DateTime, IANAZone } from 'luxon';
import type { components } from '../../generated/openapi.js';
import { unauthorized, unprocessable } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { monthStart } from './admission.js';

type Usage = components['schemas']['Usage'];
type UsageFigures = components['schemas']['UsageFigures'];
type WorkspaceLimits = components['schemas']['WorkspaceLimits'];
type DestinationPolicy = components['schemas']['DestinationPolicy'];

/** The longest range `GET /api/v1/usage` reads, in days (a quarter): one query stays small. */
export const MAX_USAGE_DAYS = 92;
/** The default range: the last 30 days, today included. */
export const DEFAULT_USAGE_DAYS = 30;

export interface UsageOptions {
  /** Minutes a month by plan; a plan not listed is unlimited (as admission has it). */
  planMinutes: Record<string, number>;
  minuteSeconds: number;
  prices: { phoneCall: number; webSession: number; textSession: number };
  maxCallDurationS: number;
  webSessionCreation: { perHour: { limit: number; windowMs: number }; perDay: { limit: number; windowMs: number } };
}

/** What other rooms know of a workspace's limits, handed in by the assembly. */
export interface LimitSources {
  destinationPolicy(workspaceId: string): Promise<DestinationPolicy>;
  /** Web session tokens the workspace created in the last `windowMs` (as the creation limit counts them). */
  webSessionsCreated(workspaceId: string, windowMs: number): Promise<number>;
}

export interface UsageQuery {
  from?: string;
  to?: string;
  timezone?: string;
}

interface UsageRow {
  day: string;
  kind: 'phone_call' | 'web_session';
  agent_id: string | null;
  conversations: string;
  minutes: string;
  seconds: string;
  cents: string;
}

const zero = (): UsageFigures => ({ conversations: 0, minutes: 0, billed_seconds: 0, cost_cents: 0 });
const add = (f: UsageFigures, r: Pick<UsageRow, 'conversations' | 'minutes' | 'seconds' | 'cents'>) => {
  f.conversations += Number(r.conversations);
  f.minutes += Number(r.minutes);
  f.billed_seconds += Number(r.seconds);
  f.cost_cents += Number(r.cents);
};
const channel = (kind: UsageRow['kind']) => (kind === 'phone_call' ? 'phone' : 'web');

export class UsageService {
  /** The time zone names PostgreSQL knows, lower-cased (it matches them regardless of case); read once. */
  private pgZones: Promise<Set<string>> | undefined;

  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly opts: UsageOptions,
    private readonly sources: LimitSources,
  ) {}

  /** The range a query asks for, defaults filled, or the 422 that refuses it. */
  range(q: UsageQuery): { from: DateTime; to: DateTime; timezone: string } {
    const timezone = q.timezone ?? 'UTC';
    if (!IANAZone.isValidZone(timezone)) throw unprocessable('invalid_timezone', `'${timezone.slice(0, 64)}' is not an IANA time zone.`, 'timezone');
    const day = (s: string, param: string) => {
      const d = DateTime.fromISO(s, { zone: timezone });
      // The contract's `format: date` already refused anything else; this guards the type.
      if (!d.isValid) throw unprocessable('invalid_value', `'${s}' is not a date (YYYY-MM-DD).`, param);
      return d.startOf('day');
    };
    const to = q.to ? day(q.to, 'to') : DateTime.fromJSDate(this.clock.now(), { zone: timezone }).startOf('day');
    const from = q.from ? day(q.from, 'from') : to.minus({ days: DEFAULT_USAGE_DAYS - 1 });
    if (from > to) throw unprocessable('invalid_range', `'from' (${from.toISODate()}) is after 'to' (${to.toISODate()}).`, 'from');
    const days = Math.round(to.diff(from, 'days').days) + 1;
    if (days > MAX_USAGE_DAYS)
      throw unprocessable(
        'invalid_range',
        `The range ${from.toISODate()} to ${to.toISODate()} is ${days} days; at most ${MAX_USAGE_DAYS} days can be read at once.`,
        'from',
      );
    return { from, to, timezone };
  }

  /**
   * 422 for a zone PostgreSQL, which cuts the days, does not know: the runtime's time zone data and
   * the database's differ (e.g. `US/Pacific-New`, dropped from PostgreSQL's).
   */
  private async checkDatabaseZone(timezone: string): Promise<void> {
    this.pgZones ??= this.db
      .raw<{ rows: Array<{ name: string }> }>('select name from pg_timezone_names')
      .then(({ rows }) => new Set(rows.map((r) => r.name.toLowerCase())))
      .catch((err: unknown) => {
        this.pgZones = undefined;
        throw err;
      });
    if (!(await this.pgZones).has(timezone.toLowerCase()))
      throw unprocessable('invalid_timezone', `'${timezone.slice(0, 64)}' is not a time zone the database knows.`, 'timezone');
  }

  /** GET /api/v1/usage. */
  async usage(workspaceId: string, q: UsageQuery): Promise<Usage> {
    const { from, to, timezone } = this.range(q);
    await this.checkDatabaseZone(timezone);
    // Days are cut on the workspace's chosen time zone by PostgreSQL (the bounds too, so a day of 23
    // or 25 hours across a DST change is one day).
    const { rows } = await this.db.raw<{ rows: UsageRow[] }>(
      `select to_char(timezone(?, started_at)::date, 'YYYY-MM-DD') as day, kind, agent_id,
              count(*) as conversations, sum(minutes) as minutes, sum(seconds) as seconds, sum(cents) as cents
         from usage_records
        where workspace_id = ?
          and started_at >= timezone(?, cast(? as date)::timestamp)
          and started_at < timezone(?, (cast(? as date) + 1)::timestamp)
        group by 1, 2, 3`,
      [timezone, workspaceId, timezone, from.toISODate()!, timezone, to.toISODate()!],
    );
    const totals = { phone: zero(), web: zero(), all: zero() };
    const days = new Map<string, { date: string; phone: UsageFigures; web: UsageFigures }>();
    for (let d = from; d <= to; d = d.plus({ days: 1 })) days.set(d.toISODate()!, { date: d.toISODate()!, phone: zero(), web: zero() });
    const agents = new Map<string, { agent_id: string; phone: UsageFigures; web: UsageFigures }>();
    for (const r of rows) {
      const c = channel(r.kind);
      add(totals[c], r);
      add(totals.all, r);
      const day = days.get(r.day);
      if (day) add(day[c], r);
      // Only records metered before agents were recorded, whose conversation record is gone, have no agent.
      if (r.agent_id) {
        const a = agents.get(r.agent_id) ?? { agent_id: r.agent_id, phone: zero(), web: zero() };
        add(a[c], r);
        agents.set(r.agent_id, a);
      }
    }
    const minutesOf = (a: { phone: UsageFigures; web: UsageFigures }) => a.phone.minutes + a.web.minutes;
    return {
      object: 'usage',
      from: from.toISODate()!,
      to: to.toISODate()!,
      timezone,
      totals,
      days: [...days.values()],
      agents: [...agents.values()].sort((a, b) => minutesOf(b) - minutesOf(a) || (a.agent_id < b.agent_id ? -1 : 1)),
    };
  }

  /** GET /api/v1/limits. */
  async limits(workspaceId: string): Promise<WorkspaceLimits> {
    const now = this.clock.now();
    const start = monthStart(now);
    // One snapshot: the balance, what reservations hold and what was used agree with each other.
    const figures = await this.db.transaction(
      async (trx) => {
        const ws = await trx('workspaces').where({ id: workspaceId }).first('plan', 'subscription_status', 'credit_balance_cents', 'concurrent_session_limit');
        if (!ws) return undefined;
        const leases: Array<{ kind: string; n: string }> = await trx('session_leases')
          .where('workspace_id', workspaceId)
          .where('expires_at', '>', trx.fn.now())
          .groupBy('kind')
          .select('kind', trx.raw('count(*) as n'));
        const [held] = await trx('reservations')
          .where('workspace_id', workspaceId)
          .where('expires_at', '>', trx.fn.now())
          .select(trx.raw('coalesce(sum(cents), 0)::bigint as cents'), trx.raw('coalesce(sum(minutes), 0)::bigint as minutes'));
        const [{ total }] = await trx('usage_records')
          .where('workspace_id', workspaceId)
          .where('started_at', '>=', start)
          .sum<{ total: string | null }[]>('seconds as total');
        return { ws, leases, held: held as { cents: string; minutes: string }, usedSeconds: Number(total ?? 0) };
      },
      { isolationLevel: 'repeatable read', readOnly: true },
    );
    if (!figures) throw unauthorized('The workspace of this credential no longer exists.');
    const { ws, leases, held, usedSeconds } = figures;
    const [policy, perHour, perDay] = await Promise.all([
      this.sources.destinationPolicy(workspaceId),
      this.sources.webSessionsCreated(workspaceId, this.opts.webSessionCreation.perHour.windowMs),
      this.sources.webSessionsCreated(workspaceId, this.opts.webSessionCreation.perDay.windowMs),
    ]);
    const liveCalls = leases.filter((l) => l.kind === 'call').reduce((n, l) => n + Number(l.n), 0);
    const live = leases.reduce((n, l) => n + Number(l.n), 0);
    const balance = Number(ws.credit_balance_cents);
    const reservedCents = Number(held.cents);
    const reservedMinutes = Number(held.minutes);
    const included = this.opts.planMinutes[ws.plan as string] ?? null;
    const used = usedSeconds / this.opts.minuteSeconds;
    // Two decimals are enough to read; `used` stays exact in seconds in the usage read.
    const round = (n: number) => Math.round(n * 100) / 100;
    return {
      plan: ws.plan,
      subscription_status: ws.subscription_status,
      concurrency: { limit: ws.concurrent_session_limit, live, live_phone_calls: liveCalls, live_web_sessions: live - liveCalls },
      credit: { balance_cents: balance, reserved_cents: reservedCents, available_cents: Math.max(0, balance - reservedCents) },
      plan_minutes: {
        included,
        used: round(used),
        reserved: reservedMinutes,
        left: included === null ? null : round(Math.max(0, included - used - reservedMinutes)),
        period_start: start.toISOString(),
        resets_at: new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1)).toISOString(),
      },
      prices: {
        phone_call_cents_per_minute: this.opts.prices.phoneCall,
        web_session_cents_per_minute: this.opts.prices.webSession,
        text_session_cents_per_minute: this.opts.prices.textSession,
      },
      max_call_duration_seconds: this.opts.maxCallDurationS,
      web_session_creation: {
        per_hour: { limit: this.opts.webSessionCreation.perHour.limit, used: perHour },
        per_day: { limit: this.opts.webSessionCreation.perDay.limit, used: perDay },
      },
      destination_policy: policy,
    };
  }
}
