/**
 * Idempotency keys, applied by the router to every operation that declares the `Idempotency-Key`
 * header (Contract: `OperationInfo.idempotent`). A key is scoped by workspace and operation:
 * - the first request with a key claims it (`in_progress`) and runs; its response (status < 500,
 *   errors of the handler included) is stored for IDEMPOTENCY_TTL_MS (24 hours);
 * - the same key with the same request (method, path, query, body compared as canonical JSON)
 *   replays that response with `Idempotent-Replayed: true`;
 * - the same key with a different request: 422 `idempotency_key_reused`;
 * - while the first request runs: 409 `idempotency_request_in_progress`;
 * - a 5xx or unexpected failure releases the key, so the request can be retried.
 * Request validation runs before (an invalid request never claims a key). A claim older than
 * IDEMPOTENCY_LOCK_TIMEOUT_MS that never completed (a crashed instance) may be taken over.
 */
import { createHash } from 'node:crypto';
import type { Context } from 'koa';
import type { Knex } from 'knex';
import type { Clock } from '../lib/clock.js';
import { ApiError, type CodeFor } from './errors.js';
import { renderError } from './envelope.js';
import type { Contract } from './contract.js';
import type { AnyReply } from '../contract/handlers.js';

export interface IdempotencyOptions {
  ttlMs: number;
  lockTimeoutMs: number;
}

interface KeyRow {
  scope: string;
  operation_id: string;
  key: string;
  request_hash: string;
  state: 'in_progress' | 'completed';
  response_status: number | null;
  response_body: unknown;
  response_headers: { headers?: Record<string, string>; type?: string } | null;
  locked_at: Date;
}

export interface IdempotentRequest {
  ctx: Context;
  /** The workspace the key belongs to. */
  scope: string;
  operationId: string;
  key: string;
}

/** JSON with object keys sorted, so `{a, b}` and `{b, a}` are the same request. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** Expired keys are deleted at most this often (a key past its window is also replaced when reused). */
const PURGE_INTERVAL_MS = 60 * 60 * 1000;
const idempotencyError = <S extends number>(status: S, code: CodeFor<S>, message: string) => new ApiError(status, 'idempotency_error', code, message);

export class Idempotency {
  constructor(
    private readonly db: Knex,
    private readonly clock: Clock,
    private readonly contract: Contract,
    private readonly opts: IdempotencyOptions,
  ) {}

  fingerprint(ctx: Context): string {
    // Uploaded files are not in the parsed body: their digests (set by the upload parser) stand in for them.
    const files = (ctx.state.fileDigests as Record<string, string[]> | undefined) ?? null;
    const request = { method: ctx.method, path: ctx.path, query: ctx.query, body: (ctx.request as { body?: unknown }).body ?? null, files };
    return createHash('sha256').update(canonical(request)).digest('hex');
  }

  private lastPurge = 0;

  async run(req: IdempotentRequest, invoke: () => Promise<AnyReply>): Promise<AnyReply> {
    const now = this.clock.now().getTime();
    if (now - this.lastPurge > PURGE_INTERVAL_MS) {
      this.lastPurge = now;
      this.purgeExpired().catch(() => undefined);
    }
    const hash = this.fingerprint(req.ctx);
    const claim = await this.claim(req, hash);
    return claim instanceof Date ? this.execute(req, claim, invoke) : this.replay(claim);
  }

  /** Our claim time when the key is ours to run, or the row to replay; throws 409/422 otherwise. */
  private async claim(req: IdempotentRequest, hash: string): Promise<Date | KeyRow> {
    for (let i = 0; i < 5; i++) {
      const now = this.clock.now();
      const expiresAt = new Date(now.getTime() + this.opts.ttlMs);
      const staleBefore = new Date(now.getTime() - this.opts.lockTimeoutMs);
      const claimed = await this.db.raw(
        `insert into idempotency_keys (scope, operation_id, key, request_hash, state, locked_at, expires_at, created_at)
         values (?, ?, ?, ?, 'in_progress', ?, ?, ?)
         on conflict (scope, operation_id, key) do update
           set request_hash = excluded.request_hash, state = 'in_progress', response_status = null, response_body = null,
               response_headers = null, locked_at = excluded.locked_at, expires_at = excluded.expires_at, created_at = excluded.created_at
           where idempotency_keys.expires_at <= ? or (idempotency_keys.state = 'in_progress' and idempotency_keys.locked_at <= ?)
         returning locked_at`,
        [req.scope, req.operationId, req.key, hash, now, expiresAt, now, now, staleBefore],
      );
      if (claimed.rows.length) return new Date(claimed.rows[0].locked_at);
      const row = (await this.db('idempotency_keys').where({ scope: req.scope, operation_id: req.operationId, key: req.key }).first()) as KeyRow | undefined;
      if (!row) continue; // released in between: claim again
      if (row.request_hash !== hash) {
        throw idempotencyError(
          422,
          'idempotency_key_reused',
          'This Idempotency-Key was already used with a different request; use a new key for a new request.',
        );
      }
      if (row.state === 'in_progress') {
        throw idempotencyError(409, 'idempotency_request_in_progress', 'A request with this Idempotency-Key is still in progress; retry shortly.');
      }
      return row;
    }
    throw idempotencyError(409, 'idempotency_request_in_progress', 'A request with this Idempotency-Key is still in progress; retry shortly.');
  }

  private where(req: IdempotentRequest, claimedAt: Date) {
    return this.db('idempotency_keys').where({ scope: req.scope, operation_id: req.operationId, key: req.key, state: 'in_progress', locked_at: claimedAt });
  }

  private async execute(req: IdempotentRequest, claimedAt: Date, invoke: () => Promise<AnyReply>): Promise<AnyReply> {
    let reply: AnyReply;
    try {
      reply = await invoke();
    } catch (err) {
      if (err instanceof ApiError && err.status < 500) {
        await this.store(req, claimedAt, this.errorReply(req.ctx, err));
      } else {
        await this.where(req, claimedAt).delete();
      }
      throw err;
    }
    if (reply.status >= 500) await this.where(req, claimedAt).delete();
    else await this.store(req, claimedAt, reply);
    return reply;
  }

  private async store(req: IdempotentRequest, claimedAt: Date, reply: AnyReply): Promise<void> {
    await this.where(req, claimedAt).update({
      state: 'completed',
      response_status: reply.status,
      response_body: JSON.stringify(reply.body ?? null),
      response_headers: JSON.stringify({ headers: reply.headers ?? {}, ...(reply.type ? { type: reply.type } : {}) }),
    });
  }

  /** The envelope the error middleware will render for this error, as a reply to store. */
  private errorReply(ctx: Context, err: ApiError): AnyReply {
    const scratch = { state: ctx.state, status: 0, body: undefined as unknown, set: () => undefined } as unknown as Context;
    renderError(scratch, err, this.contract);
    return { status: err.status, body: scratch.body, headers: err.headers };
  }

  private replay(row: KeyRow): AnyReply {
    const stored = row.response_headers ?? {};
    return {
      status: row.response_status ?? 200,
      body: row.response_body ?? undefined,
      headers: { ...(stored.headers ?? {}), 'Idempotent-Replayed': 'true' },
      ...(stored.type ? { type: stored.type } : {}),
    };
  }

  /** Removes keys past their replay window. */
  async purgeExpired(): Promise<number> {
    return this.db('idempotency_keys').where('expires_at', '<=', this.clock.now()).delete();
  }
}
