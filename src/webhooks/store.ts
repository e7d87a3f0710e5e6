/** Webhooks, the workspace signing secret, events and deliveries (the outbox) in PostgreSQL. */
import type { Knex } from 'knex';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';
import type { NotifiedCache } from '../db/notified-cache.js';
import { OPT_IN_KINDS, type EventKind } from './payloads.js';

export interface WebhookRow {
  id: string;
  workspace_id: string;
  url: string;
  url_key: string;
  events: EventKind[];
  created_at: Date;
}

export interface SecretRow {
  workspace_id: string;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_expires_at: Date | null;
}

export type DeliveryError =
  'timeout' | 'redirect_not_followed' | 'connection_refused' | 'blocked_address' | 'dns_failure' | 'tls_error' | 'http_error' | 'network_error' | 'interrupted';

export interface DeliveryRow {
  id: string;
  event_id: string;
  workspace_id: string;
  webhook_id: string | null;
  kind: EventKind;
  call_id: string | null;
  batch_id: string | null;
  target_url: string;
  url_key: string;
  state: 'pending' | 'sending' | 'done';
  status: 'succeeded' | 'failed' | null;
  status_code: number | null;
  error: DeliveryError | null;
  signed: boolean | null;
  duration_ms: number | null;
  attempted_at: Date | null;
  created_at: Date;
}

/** A claimed delivery with what sending it needs: the body and the workspace's secret row, if any yet. */
export interface ClaimedDelivery extends DeliveryRow {
  body: string;
  secret: SecretRow | undefined;
}

export interface DeliveryOutcome {
  status: 'succeeded' | 'failed';
  statusCode: number | null;
  error: DeliveryError | null;
  signed: boolean;
  durationMs: number;
  attemptedAt: Date;
}

export interface NewEvent {
  id: string;
  workspaceId: string;
  kind: EventKind;
  callId: string | null;
  batchId: string | null;
  body: string;
  /** The call's or batch's own webhook_url, when it has one. */
  ownTarget: { url: string; urlKey: string } | null;
}

export const NOTIFY_CHANNEL = 'webhook_deliveries';

/** What the dispatcher can take in one claim (see WebhookStore.claim). */
export interface ClaimShares {
  /** Slots free in this dispatcher. */
  free: number;
  /** Slots kept for workspaces with nothing in flight. */
  reserve: number;
  /** Slots shared by workspaces already sending (concurrency minus reserve). */
  pool: number;
  /** Deliveries in flight here, by workspace. */
  inFlight: Map<string, number>;
  /** Workspaces are walked from the one after this id ('' for the first). */
  after: string;
  /** Workspaces looked at per claim at most. */
  scan: number;
}

export class WebhookStore {
  constructor(
    readonly db: Knex,
    /**
     * The event kinds each workspace's webhooks list, by workspace id (dropped by migration 030's
     * trigger on any write to the workspace's webhooks). None: `listens` reads the database each time.
     */
    private readonly listedKinds?: NotifiedCache<readonly EventKind[]>,
  ) {}

  // Registry

  /**
   * Registers a URL, or returns the webhook already registered with the same URL key unchanged (its
   * events change only through `updateEvents`). The workspace row is locked so that concurrent
   * registrations cannot pass the limit together.
   */
  async register(
    workspaceId: string,
    input: { id: string; url: string; urlKey: string; events: EventKind[] | undefined; defaultEvents: EventKind[] },
    limit: number,
  ): Promise<{ webhook: WebhookRow; created: boolean } | { limitReached: true }> {
    const registered = await this.db.transaction(async (trx) => {
      await trx('workspaces').where({ id: workspaceId }).forUpdate().first('id');
      const existing: WebhookRow | undefined = await trx('webhooks').where({ workspace_id: workspaceId, url_key: input.urlKey }).first();
      if (existing) return { webhook: existing, created: false };
      const [{ count }] = await trx('webhooks').where({ workspace_id: workspaceId }).count<{ count: string }[]>('* as count');
      if (Number(count) >= limit) return { limitReached: true as const };
      const [row] = await trx('webhooks')
        .insert({ id: input.id, workspace_id: workspaceId, url: input.url, url_key: input.urlKey, events: input.events ?? input.defaultEvents })
        .returning('*');
      return { webhook: row as WebhookRow, created: true };
    });
    if ('created' in registered && registered.created) this.written(workspaceId);
    return registered;
  }

  listWebhooks<T>(workspaceId: string, params: PageParams, toItem: (row: WebhookRow) => T): Promise<Page<T>> {
    return paginate<WebhookRow & { id: string }, T>(this.db('webhooks').where({ workspace_id: workspaceId }), params, toItem);
  }

  getWebhook(id: string): Promise<WebhookRow | undefined> {
    return this.db('webhooks').where({ id }).first();
  }

  /** Replaces a webhook's events; undefined when the workspace has no such webhook. */
  async updateEvents(workspaceId: string, id: string, events: EventKind[]): Promise<WebhookRow | undefined> {
    const [row] = await this.db('webhooks').where({ id, workspace_id: workspaceId }).update({ events, updated_at: this.db.fn.now() }).returning('*');
    this.written(workspaceId);
    return row as WebhookRow | undefined;
  }

  async deleteWebhook(workspaceId: string, id: string): Promise<boolean> {
    const deleted = (await this.db('webhooks').where({ id, workspace_id: workspaceId }).delete()) > 0;
    this.written(workspaceId);
    return deleted;
  }

  // Secret

  getSecret(workspaceId: string): Promise<SecretRow | undefined> {
    return this.db('webhook_secrets').where({ workspace_id: workspaceId }).first();
  }

  /** Any one workspace's secret row (none stored yet: undefined). */
  anySecret(): Promise<SecretRow | undefined> {
    return this.db('webhook_secrets').first();
  }

  /** Stores the secret unless the workspace already has one; returns the one that won. */
  async insertSecret(workspaceId: string, sealed: string): Promise<SecretRow> {
    await this.db('webhook_secrets').insert({ workspace_id: workspaceId, secret_sealed: sealed }).onConflict('workspace_id').ignore();
    return (await this.getSecret(workspaceId))!;
  }

  /** Makes `sealed` the current secret and the replaced one the previous, valid until `previousExpiresAt`. */
  rotateSecret(workspaceId: string, sealed: string, now: Date, previousExpiresAt: Date): Promise<SecretRow> {
    return this.db.transaction(async (trx) => {
      const current: SecretRow | undefined = await trx('webhook_secrets').where({ workspace_id: workspaceId }).forUpdate().first();
      if (!current) {
        const [row] = await trx('webhook_secrets').insert({ workspace_id: workspaceId, secret_sealed: sealed, rotated_at: now }).returning('*');
        return row as SecretRow;
      }
      const [row] = await trx('webhook_secrets')
        .where({ workspace_id: workspaceId })
        .update({ secret_sealed: sealed, previous_secret_sealed: current.secret_sealed, previous_expires_at: previousExpiresAt, rotated_at: now })
        .returning('*');
      return row as SecretRow;
    });
  }

  // Events and the outbox

  /**
   * Whether a webhook of the workspace lists `kind`. In `trx` (read there on a miss, so no second
   * connection is taken) it does not see webhooks the transaction itself writes: no caller writes
   * webhooks and asks this in one transaction.
   */
  async listens(workspaceId: string, kind: EventKind, trx?: Knex.Transaction): Promise<boolean> {
    if (!this.listedKinds) {
      const row = await (trx ?? this.db)('webhooks').where({ workspace_id: workspaceId }).whereRaw('? = any(events)', [kind]).first('id');
      return Boolean(row);
    }
    const kinds = await this.listedKinds.get(workspaceId, async () => {
      const rows: Array<{ kind: EventKind }> = await (trx ?? this.db)('webhooks')
        .where({ workspace_id: workspaceId })
        .distinct(this.db.raw('unnest(events) as kind'));
      return rows.map((r) => r.kind);
    });
    return kinds!.includes(kind);
  }

  /** This instance wrote the workspace's webhooks (committed): what it kept of them goes now, before the trigger's NOTIFY comes back. */
  private written(workspaceId: string): void {
    this.listedKinds?.invalidate(workspaceId);
  }

  /**
   * Records an event and one pending delivery per target, in one transaction: the workspace's webhooks
   * subscribed to the event plus the event's own target, one row per URL key (a registered webhook
   * wins, so the delivery is attributed to it). Wakes dispatchers listening on NOTIFY_CHANNEL on commit.
   */
  /** Records the event and its outbox rows, in `outer` when given (they commit with the caller's own writes). */
  recordEvent(event: NewEvent, newDeliveryId: () => string, outer?: Knex.Transaction): Promise<number> {
    const run = async (trx: Knex.Transaction) => {
      // The subscribed webhooks read and the event stored in one statement (a data-modifying CTE). The
      // opt-in kinds go to registered webhooks only, and are not kept when none lists them.
      const {
        rows: [found],
      } = (await trx.raw(
        `with subscribed as (
           select id, url, url_key from webhooks where workspace_id = ? and ? = any(events)
         ), stored as (
           insert into webhook_events (id, workspace_id, kind, call_id, batch_id, body)
           select ?, ?, ?, ?, ?, ? where ? or exists (select 1 from subscribed)
           returning id
         )
         select (select count(*) from stored)::int as stored,
                (select coalesce(json_agg(s order by s.id), '[]') from subscribed s) as subscribed`,
        [event.workspaceId, event.kind, event.id, event.workspaceId, event.kind, event.callId, event.batchId, event.body, !OPT_IN_KINDS.includes(event.kind)],
      )) as { rows: Array<{ stored: number; subscribed: Array<Pick<WebhookRow, 'id' | 'url' | 'url_key'>> }> };
      if (!found.stored) return 0;
      const subscribed = found.subscribed;
      const targets = new Map<string, { webhookId: string | null; url: string }>();
      for (const w of subscribed) if (!targets.has(w.url_key)) targets.set(w.url_key, { webhookId: w.id, url: w.url });
      if (event.ownTarget && !targets.has(event.ownTarget.urlKey)) targets.set(event.ownTarget.urlKey, { webhookId: null, url: event.ownTarget.url });
      if (targets.size === 0) return 0;
      // The outbox rows and the NOTIFY in one statement.
      const deliveries = trx('webhook_deliveries').insert(
        [...targets].map(([urlKey, t]) => ({
          id: newDeliveryId(),
          event_id: event.id,
          workspace_id: event.workspaceId,
          webhook_id: t.webhookId,
          kind: event.kind,
          call_id: event.callId,
          batch_id: event.batchId,
          target_url: t.url,
          url_key: urlKey,
        })),
      );
      await trx.with('queued', deliveries).select(trx.raw('pg_notify(?, ?)', [NOTIFY_CHANNEL, event.id]));
      return targets.size;
    };
    return outer ? run(outer) : this.db.transaction(run);
  }

  /**
   * Claims up to `shares.free` pending deliveries, fairly across workspaces, so one workspace's slow
   * receivers delay only its own deliveries (the rules are those of `claim_webhook_deliveries`,
   * migration 012). SKIP LOCKED lets several dispatchers (in this process or other instances) claim
   * at once without ever taking the same row. The walk over workspaces covers `scan` of them from
   * `after` on; `scanEnd` is where the next claim should go on from (null: from the first).
   */
  async claim(shares: ClaimShares): Promise<{ deliveries: ClaimedDelivery[]; scanEnd: string | null }> {
    const result = await this.db.raw(`select * from claim_webhook_deliveries(?, ?, ?::jsonb, ?, ?, ?)`, [
      shares.after,
      shares.scan,
      JSON.stringify(Object.fromEntries(shares.inFlight)),
      shares.pool,
      shares.free,
      shares.reserve,
    ]);
    const rows = result.rows as Array<DeliveryRow & { body: string; scan_end: string | null } & Omit<SecretRow, 'workspace_id'>>;
    const deliveries = rows.map((r) => {
      const { secret_sealed, previous_secret_sealed, previous_expires_at, scan_end: _scanEnd, ...rest } = r;
      return {
        ...rest,
        secret: secret_sealed === null ? undefined : { workspace_id: r.workspace_id, secret_sealed, previous_secret_sealed, previous_expires_at },
      };
    });
    return { deliveries, scanEnd: rows[0]?.scan_end ?? null };
  }

  /** Records the outcomes of several deliveries in one statement. */
  async complete(outcomes: Array<{ id: string; outcome: DeliveryOutcome }>): Promise<void> {
    if (outcomes.length === 0) return;
    const values = outcomes.map(() => '(?::text, ?::text, ?::int, ?::text, ?::boolean, ?::int, ?::timestamptz)').join(', ');
    const bindings = outcomes.flatMap(({ id, outcome: o }) => [id, o.status, o.statusCode, o.error, o.signed, o.durationMs, o.attemptedAt]);
    await this.db.raw(
      `update webhook_deliveries d
          set state = 'done', status = v.status, status_code = v.status_code, error = v.error, signed = v.signed,
              duration_ms = v.duration_ms, attempted_at = v.attempted_at
         from (values ${values}) as v(id, status, status_code, error, signed, duration_ms, attempted_at)
        where d.id = v.id`,
      bindings,
    );
  }

  /**
   * Deliveries claimed longer ago than `staleAfterMs` belong to an instance that stopped mid-attempt.
   * They are never retried (the receiver may have received them): recorded as failed, `interrupted`.
   */
  async failInterrupted(staleAfterMs: number): Promise<number> {
    return this.db('webhook_deliveries')
      .where({ state: 'sending' })
      .whereRaw(`claimed_at < now() - (? * interval '1 millisecond')`, [staleAfterMs])
      .update({ state: 'done', status: 'failed', error: 'interrupted', signed: false, duration_ms: 0, attempted_at: this.db.ref('claimed_at') });
  }

  /** Drops events (and with them their deliveries) older than the retention period. */
  async purge(before: Date): Promise<number> {
    return this.db('webhook_events').where('created_at', '<', before).delete();
  }

  listDeliveries<T>(
    workspaceId: string,
    filter: { webhook_id?: string; call_id?: string; batch_id?: string; kind?: EventKind },
    params: PageParams,
    toItem: (row: DeliveryRow) => T,
  ): Promise<Page<T>> {
    const query = this.db('webhook_deliveries').where({ workspace_id: workspaceId, state: 'done', ...filter });
    return paginate<DeliveryRow, T>(query, params, toItem);
  }
}
