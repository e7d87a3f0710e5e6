/**
 * The webhook dispatcher: claims pending deliveries (the outbox rows written with each event), sends
 * each one once, and records the outcome. In-process, at most `concurrency` requests in flight, shared
 * fairly between workspaces (WebhookStore.claim): a quarter of the slots is kept for workspaces with
 * nothing in flight, so one workspace's slow receivers cannot hold every slot.
 * It wakes when this process raises an event (`kick`), on NOTIFY from other instances, and on a short
 * poll as a fallback (missed notifications, rows left by a restart).
 *
 * One attempt, never retried; the receiver has `timeoutMs` to answer; redirects are not followed
 * (node:http never follows them; a 3xx is recorded as failed); the URL is checked by the outbound
 * guard right before sending and again on the address resolved at connect time.
 */
import http from 'node:http';
import https from 'node:https';
import type { Listener } from '../db/listener.js';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import { guardedRequest, OutboundRequestError } from '../net/guarded-request.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { deliveryHeaders } from './signing.js';
import { NOTIFY_CHANNEL, type SecretRow, type ClaimedDelivery, type DeliveryError, type DeliveryOutcome, type WebhookStore } from './store.js';

export const USER_AGENT = 'VoiceAgentService-Webhooks/1.0';

/** Workspaces with pending deliveries looked at per claim; more are served in turns. */
const CLAIM_SCAN_WORKSPACES = 500;

export interface DispatcherSettings {
  timeoutMs: number;
  concurrency: number;
  pollIntervalMs: number;
  retentionMs: number;
}

type SigningSecrets = (workspaceId: string, known: SecretRow | undefined) => Promise<string[] | null>;

interface SendResult {
  statusCode: number | null;
  error: DeliveryError | null;
}

/** A failed request, in the delivery log's words. */
function deliveryError(err: OutboundRequestError): DeliveryError {
  // Any URL the guard refuses is recorded as blocked_address, an invalid one too.
  if (err.kind === 'invalid_url') return 'blocked_address';
  // OpenSSL errors that are not the handshake's have always been network errors for deliveries.
  if (err.kind === 'tls_error' && err.code.startsWith('ERR_OSSL_')) return 'network_error';
  if (err.kind === 'too_large') return 'network_error';
  return err.kind;
}

/** Targets are logged by host only: users put tokens in webhook paths and query strings. */
function hostOf(target: string): string {
  try {
    return new URL(target).host;
  } catch {
    return '(invalid URL)';
  }
}

export class WebhookDispatcher {
  private readonly inFlight = new Set<Promise<void>>();
  private readonly inFlightByWorkspace = new Map<string, number>();
  /** Where the next claim starts its walk over workspaces (WebhookStore.claim). */
  private scanAfter = '';
  private readonly agents: { http: http.Agent; https: https.Agent };
  private pumping: Promise<void> | undefined;
  private again = false;
  private stopped = true;
  private timer: NodeJS.Timeout | undefined;
  private lastPurge = 0;
  private housekeepingRun: Promise<void> | undefined;
  private readonly outcomes: Array<{ id: string; outcome: DeliveryOutcome; stored: () => void }> = [];
  private writingOutcomes = false;

  constructor(
    private readonly store: WebhookStore,
    private readonly signingSecrets: SigningSecrets,
    private readonly outbound: OutboundPolicy,
    private readonly clock: Clock,
    private readonly settings: DispatcherSettings,
    private readonly log: Logger,
    listener?: Listener,
  ) {
    const opts = { keepAlive: true, maxSockets: settings.concurrency };
    this.agents = { http: new http.Agent(opts), https: new https.Agent(opts) };
    // Events raised by other instances; the poll covers any notification missed while it is down.
    listener?.on(NOTIFY_CHANNEL, () => this.kick());
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.timer = setInterval(() => this.tick(), this.settings.pollIntervalMs);
    this.timer.unref();
    this.tick();
  }

  private tick(): void {
    if (this.stopped) return;
    this.housekeepingRun ??= this.housekeeping().finally(() => (this.housekeepingRun = undefined));
    this.kick();
  }

  private async housekeeping(): Promise<void> {
    try {
      // A claim older than the timeout plus a margin belongs to an instance that stopped mid-attempt.
      const interrupted = await this.store.failInterrupted(this.settings.timeoutMs + 60_000);
      if (interrupted) this.log.warn({ interrupted }, 'recorded webhook deliveries interrupted by a stopped instance');
      const now = this.clock.now().getTime();
      if (now - this.lastPurge > 60 * 60 * 1000) {
        this.lastPurge = now;
        await this.store.purge(new Date(now - this.settings.retentionMs));
      }
    } catch (err) {
      if (!this.stopped) this.log.error({ err }, 'webhook housekeeping failed');
    }
  }

  /** Wakes the dispatcher: claims and sends what is pending, up to the concurrency bound. */
  kick(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = this.pump().finally(() => {
      this.pumping = undefined;
      if (this.again) {
        this.again = false;
        this.kick();
      }
    });
  }

  private async pump(): Promise<void> {
    try {
      const { concurrency } = this.settings;
      const reserve = Math.max(1, Math.floor(concurrency / 4));
      while (!this.stopped && this.inFlight.size < concurrency) {
        const after = this.scanAfter;
        const { deliveries, scanEnd } = await this.store.claim({
          free: concurrency - this.inFlight.size,
          reserve,
          pool: Math.max(0, concurrency - reserve),
          inFlight: this.inFlightByWorkspace,
          after,
          scan: CLAIM_SCAN_WORKSPACES,
        });
        this.scanAfter = scanEnd ?? '';
        if (deliveries.length === 0) {
          // The walk started mid-list and found nothing to take: start over from the first workspace.
          if (after !== '') continue;
          return;
        }
        for (const d of deliveries) {
          const ws = d.workspace_id;
          this.inFlightByWorkspace.set(ws, (this.inFlightByWorkspace.get(ws) ?? 0) + 1);
          const p: Promise<void> = this.deliver(d).finally(() => {
            this.inFlight.delete(p);
            const left = (this.inFlightByWorkspace.get(ws) ?? 1) - 1;
            if (left > 0) this.inFlightByWorkspace.set(ws, left);
            else this.inFlightByWorkspace.delete(ws);
            this.kick();
          });
          this.inFlight.add(p);
        }
      }
    } catch (err) {
      if (!this.stopped) this.log.error({ err }, 'claiming webhook deliveries failed');
    }
  }

  private async deliver(d: ClaimedDelivery): Promise<void> {
    let outcome: DeliveryOutcome;
    try {
      const secrets = await this.signingSecrets(d.workspace_id, d.secret);
      const attemptedAt = this.clock.now();
      const headers = deliveryHeaders({
        eventId: d.event_id,
        timestamp: Math.floor(attemptedAt.getTime() / 1000),
        body: d.body,
        secrets,
        userAgent: USER_AGENT,
      });
      const started = performance.now();
      const result = await this.send(d.target_url, headers, d.body);
      const durationMs = Math.round(performance.now() - started);
      outcome = {
        status: result.error ? 'failed' : 'succeeded',
        statusCode: result.statusCode,
        error: result.error,
        signed: secrets !== null,
        durationMs,
        attemptedAt,
      };
    } catch (err) {
      this.log.error({ err, deliveryId: d.id }, 'webhook delivery failed unexpectedly');
      outcome = { status: 'failed', statusCode: null, error: 'network_error', signed: false, durationMs: 0, attemptedAt: this.clock.now() };
    }
    const level = outcome.status === 'succeeded' ? 'debug' : 'info';
    this.log[level](
      {
        deliveryId: d.id,
        eventId: d.event_id,
        targetHost: hostOf(d.target_url),
        statusCode: outcome.statusCode,
        error: outcome.error,
        durationMs: outcome.durationMs,
      },
      'webhook delivered',
    );
    await this.record(d.id, outcome);
  }

  /**
   * Outcomes are written in batches: one is written at once when no write is under way; those that
   * finish meanwhile go together in the next statement. Resolves once this outcome is stored.
   */
  private record(id: string, outcome: DeliveryOutcome): Promise<void> {
    return new Promise<void>((resolve) => {
      this.outcomes.push({ id, outcome, stored: resolve });
      if (!this.writingOutcomes) void this.writeOutcomes();
    });
  }

  private async writeOutcomes(): Promise<void> {
    this.writingOutcomes = true;
    try {
      while (this.outcomes.length > 0) {
        const batch = this.outcomes.splice(0, 500);
        try {
          await this.store.complete(batch);
        } catch (err) {
          this.log.error({ err, deliveries: batch.map((b) => b.id) }, 'recording webhook deliveries failed');
        }
        for (const b of batch) b.stored();
      }
    } finally {
      this.writingOutcomes = false;
    }
  }

  /** One POST; resolves with the status or the kind of failure. The body is sent as signed, byte for byte. */
  private async send(target: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    try {
      const res = await guardedRequest(this.outbound, target, { method: 'POST', headers, body, timeoutMs: this.settings.timeoutMs, agents: this.agents });
      res.body.resume();
      const code = res.status;
      if (code >= 200 && code < 300) return { statusCode: code, error: null };
      if (code >= 300 && code < 400) return { statusCode: code, error: 'redirect_not_followed' };
      return { statusCode: code, error: 'http_error' };
    } catch (err) {
      if (err instanceof OutboundRequestError) return { statusCode: null, error: deliveryError(err) };
      throw err;
    }
  }

  /** Stops claiming and waits for the deliveries in flight (each ends within the timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.pumping;
    await this.housekeepingRun;
    while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}
