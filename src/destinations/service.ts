/**
 * Destination policy, without Koa: the workspace's policy as developers read it and the operator sets
 * it, and the checks the calls, batches and agents domains run before they store or dial a number.
 * The daily cap itself is kept by the database (migration 016); this reads how much of it is left and
 * turns the database's refusal into the API's 429.
 */
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import { ApiError, notFound, unauthorized, unprocessable } from '../errors/api-error.js';
import { isCheckViolation } from '../lib/db-errors.js';
import type { Clock } from '../lib/clock.js';
import type { Knex } from 'knex';
import { isDialableCountry } from './numbers.js';
import { callerIdRefusal, destinationRefusal, type DestinationPolicy, type NumberRefusal } from './policy.js';
import { DAILY_CAP_CONSTRAINT, type DestinationStore, type PolicyChanges, type PolicyRow } from './store.js';

export type DestinationPolicyView = components['schemas']['DestinationPolicy'];
type UpdateRequest = components['schemas']['DestinationPolicyUpdateRequest'];

/** The API's 422 for a refused number, blamed on the field it came from. */
export function numberError(r: NumberRefusal, param: string): ApiError<422> {
  return unprocessable(r.code, `${param}: ${r.message}`, param);
}

/** 422 unless `number` may be a calling number (the agent's provider phone number, `from_number`). */
export function checkCallerId(number: string, param: string): void {
  const refusal = callerIdRefusal(number);
  if (refusal) throw numberError(refusal, param);
}

const toPolicy = (row: PolicyRow): DestinationPolicy => ({
  allowedCountries: row.allowed_countries,
  allowedNumberTypes: row.allowed_number_types,
  dailyCallCap: row.daily_call_cap,
});

/** Numbers classified between two turns of the event loop (about 10 ms of work). */
const SCREEN_SLICE = 200;

/** Seconds from `now` to the next 00:00 UTC. */
const secondsToUtcMidnight = (now: Date) => {
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
  return Math.max(1, Math.ceil((midnight - now.getTime()) / 1000));
};

export class DestinationService {
  constructor(
    private readonly store: DestinationStore,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  private async row(workspaceId: string): Promise<PolicyRow> {
    const row = await this.store.policy(workspaceId);
    if (!row) throw unauthorized('The workspace of this credential no longer exists.');
    return row;
  }

  /** The policy in force for the workspace (its stored row, the defaults until the operator sets one). */
  async policy(workspaceId: string): Promise<DestinationPolicy> {
    return toPolicy(await this.row(workspaceId));
  }

  private async view(row: PolicyRow): Promise<DestinationPolicyView> {
    const today = await this.store.today(row.workspace_id);
    return {
      allowed_countries: row.allowed_countries,
      allowed_number_types: row.allowed_number_types,
      allowed_sip_domains: row.allowed_sip_domains,
      daily_call_cap: row.daily_call_cap,
      calls_placed_today: today.placed,
      day_resets_at: today.resetsAt.toISOString(),
      updated_at: row.updated_at.toISOString(),
    };
  }

  /** GET /api/v1/workspace/destination-policy. */
  async read(workspaceId: string): Promise<DestinationPolicyView> {
    return this.view(await this.row(workspaceId));
  }

  /** GET /admin/v1/workspaces/{id}/destination-policy. */
  async readForOperator(workspaceId: string): Promise<DestinationPolicyView> {
    const row = await this.store.policy(workspaceId);
    if (!row) throw notFound('workspace_not_found', `No workspace '${workspaceId.slice(0, 64)}'.`);
    return this.view(row);
  }

  /** PATCH /admin/v1/workspaces/{id}/destination-policy: only the fields present change. */
  async update(workspaceId: string, body: UpdateRequest): Promise<DestinationPolicyView> {
    const changes: PolicyChanges = {};
    if (body.allowed_countries !== undefined) {
      const unknown = body.allowed_countries?.find((c) => !isDialableCountry(c));
      if (unknown)
        throw unprocessable('invalid_value', `'${unknown}' is not the ISO 3166-1 alpha-2 code of a country with phone numbers.`, 'allowed_countries');
      changes.allowed_countries = body.allowed_countries;
    }
    if (body.allowed_number_types !== undefined) changes.allowed_number_types = body.allowed_number_types;
    if (body.daily_call_cap !== undefined) changes.daily_call_cap = body.daily_call_cap;
    if (body.allowed_sip_domains !== undefined) changes.allowed_sip_domains = [...new Set(body.allowed_sip_domains.map((d) => d.toLowerCase()))];
    const row = await this.store.update(workspaceId, changes);
    if (!row) throw notFound('workspace_not_found', `No workspace '${workspaceId.slice(0, 64)}'.`);
    this.log.info({ workspaceId, fields: Object.keys(changes) }, 'destination policy updated by operator');
    return this.view(row);
  }

  /** 422 unless the workspace may call `number` (`param` names the field it came from). */
  async checkDestination(workspaceId: string, number: string, param: string): Promise<void> {
    const refusal = destinationRefusal(await this.policy(workspaceId), number);
    if (refusal) throw numberError(refusal, param);
  }

  /**
   * 422 unless a transfer destination may point at `uri` (the contract checked its shape): a port up
   * to 65535, no empty host label, and a host that is one of the workspace's SIP trunks' termination
   * hosts or allowed by its policy's `allowed_sip_domains` (`*.d` for d's subdomains; an IP address
   * only listed exactly).
   */
  async checkSipUri(workspaceId: string, uri: string, param: string): Promise<void> {
    const m = /@([A-Za-z0-9.-]+)(?::([0-9]{1,5}))?(?:;|$)/.exec(uri);
    const host = m?.[1].toLowerCase() ?? '';
    if (!m || host.split('.').some((label) => label === '') || (m[2] !== undefined && (Number(m[2]) < 1 || Number(m[2]) > 65535)))
      throw unprocessable('invalid_sip_uri', `${param}: not a SIP address this service can call (check the host and port).`, param);
    const [row, trunkHosts] = await Promise.all([this.row(workspaceId), this.store.trunkHosts(workspaceId)]);
    const isIp = /^[0-9.]+$/.test(host);
    const listed = row.allowed_sip_domains.some((d) => d === host || (!isIp && d.startsWith('*.') && host.endsWith(d.slice(1))));
    if (!listed && !trunkHosts.includes(host))
      throw unprocessable(
        'sip_uri_not_allowed',
        `${param}: the host '${host}' is neither one of the workspace's SIP trunks nor in its destination policy's allowed_sip_domains.`,
        param,
      );
  }

  /**
   * The refusals of many numbers (a batch's recipients, up to 10,000) as a lookup. A classification
   * costs tens of microseconds, so the numbers are classified in slices with a turn of the event
   * loop between them: a large batch never holds up other requests for more than one slice.
   */
  async screenMany(workspaceId: string, numbers: Iterable<string>): Promise<(number: string) => NumberRefusal | null> {
    const policy = await this.policy(workspaceId);
    const refusals = new Map<string, NumberRefusal | null>();
    let sinceYield = 0;
    for (const number of numbers) {
      if (refusals.has(number)) continue;
      refusals.set(number, destinationRefusal(policy, number));
      if (++sinceYield === SCREEN_SLICE) {
        sinceYield = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    return (number) => refusals.get(number) ?? destinationRefusal(policy, number);
  }

  /** Why a live call may not be transferred to `number` now, or null. */
  async transferRefusal(workspaceId: string, number: string): Promise<NumberRefusal | null> {
    return destinationRefusal(await this.policy(workspaceId), number);
  }

  /**
   * Calls the workspace may still place today: null when it has no cap. A read only: the database
   * refuses an insert past the cap even when two transactions read the same headroom.
   */
  async headroom(workspaceId: string, db?: Knex.Transaction): Promise<{ remaining: number | null; resetsAt: Date }> {
    const row = await this.store.policy(workspaceId, db);
    const today = await this.store.today(workspaceId, db);
    const cap = row?.daily_call_cap ?? null;
    return { remaining: cap === null ? null : Math.max(0, cap - today.placed), resetsAt: today.resetsAt };
  }

  /** 429 `daily_call_cap_reached` when the workspace has no call left today. */
  async checkDailyCap(workspaceId: string): Promise<void> {
    const { remaining } = await this.headroom(workspaceId);
    if (remaining === 0) throw this.capReached();
  }

  /** The 429 for the database's refusal of a call past the cap (two requests raced for the last one), else null. */
  dailyCapError(err: unknown): ApiError<429> | null {
    return isCheckViolation(err, DAILY_CAP_CONSTRAINT) ? this.capReached() : null;
  }

  private capReached(): ApiError<429> {
    const retryAfter = secondsToUtcMidnight(this.clock.now());
    return new ApiError(
      429,
      'rate_limit_error',
      'daily_call_cap_reached',
      "The workspace has placed as many calls today (UTC) as its destination policy's daily_call_cap allows; retry after 00:00 UTC.",
      { headers: { 'Retry-After': String(retryAfter) } },
    );
  }
}
