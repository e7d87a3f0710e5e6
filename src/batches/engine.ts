/**
 * The batch engine, on the job queue. One `batch_dispatch` job runs a dispatch round for a batch: in
 * one transaction holding the batch row it claims due recipients (FOR UPDATE SKIP LOCKED), takes
 * their concurrency slots, writes their calls with the calls' dial and deadline jobs, and marks them
 * `dialing`. Either all of that commits or none of it, so a crash never loses or doubles a call, and
 * two instances never dial one recipient twice (the carrier is asked at most once per call by the
 * call's own dial job).
 *
 * Rounds are woken by the job queue: at once after an API action or when one of the batch's calls
 * ends (the call's terminal transaction records the recipient's outcome and adds the wake-up), and at
 * a time the last round chose (the batch's start, a retry's delay, the calling window). The two use
 * separate job keys, because a pending keyed job is replaced by a later add: only the round itself,
 * holding the batch row, sets the timed one.
 *
 * Fair dispatch (issue 21). A round that finds no free slot of its workspace does not re-arm a job of
 * its own: the batch joins its workspace's line (`slot_wait_since`) and the workspace's one
 * `batch_slots` job looks again after a short wait, running the line's rounds oldest first until one
 * comes up short (which goes to the back). So a workspace's waiting batches cost one job per wait,
 * however many there are; and every batch job has a lower priority than a call's own jobs, so
 * `call_dial` never waits behind any workspace's batch bookkeeping.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import { PRIORITY, idPayload, jobAdd, jobKind, type JobAdd, type JobQueue } from '../jobs/queue.js';
import type { CallService, OutboundPlan } from '../calls/service.js';
import { isRefusal } from '../calls/refusals.js';
import type { CallRow } from '../calls/store.js';
import { combinedOverride } from '../voice/conversation-settings.js';
import type { WorkspaceAdmission } from '../workspaces/admission.js';
import type { DestinationService } from '../destinations/service.js';
import type { DoNotCallService } from '../do-not-call/service.js';
import type { BatchCompletedPublisher } from '../webhooks/events.js';
import { nextOpening } from './calling-window.js';
import { TERMINAL_BATCH, type BatchRow, type BatchStore, type RecipientRow, type RecipientStatus } from './store.js';

/** A dispatch round asked for now (API actions, a call that ended); asks while one is pending join it. */
const DISPATCH_JOB = jobKind<{ batch_id: string }>({
  name: 'batch_dispatch',
  parse: idPayload('batch_id'),
  key: (p) => `batch_dispatch:${p.batch_id}`,
  maxAttempts: 10,
  priority: PRIORITY.batch,
});
/** The same round at a time the last round chose: a key of its own, so it never cancels a wake-up. */
const TIMER_JOB = jobKind<{ batch_id: string }>({ ...DISPATCH_JOB, key: (p) => `batch_timer:${p.batch_id}` });
/** A workspace's batches waiting for a free slot, looked at again: one job per workspace. */
const SLOTS_JOB = jobKind<{ workspace_id: string }>({
  name: 'batch_slots',
  parse: idPayload('workspace_id'),
  key: (p) => `batch_slots:${p.workspace_id}`,
  maxAttempts: 10,
  priority: PRIORITY.batch,
});

/** Rounds one `batch_slots` job runs before it hands over to a fresh job (others' jobs run between). */
const SLOT_ROUNDS_PER_JOB = 20;

/** What a round leaves to do: another round at once, a wait in the workspace's line for a slot, or nothing now. */
type RoundOutcome = 'more' | 'short' | 'done';

/** Claim passes per round when recipients outside the calling window are set aside. */
const MAX_CLAIM_PASSES = 20;

export interface EngineOptions {
  /**
   * A wake-up runs this long after the first ask; the asks meanwhile join it (calls ending close
   * together make one dispatch round, not one each).
   */
  wakeDelayMs: number;
  /** Calls written per dispatch transaction (a larger room is filled by consecutive rounds). */
  chunk: number;
  /** How soon a batch looks again when the workspace had no free slot (or the instance was overloaded). */
  capacityRetryMs: number;
  /** The instance is too busy to start calls now: rounds wait capacityRetryMs. */
  overloaded: () => boolean;
}

type Readiness = { plan: OutboundPlan; limit: number; workspacePlan: string } | { refusal: string };

export class BatchEngine {
  constructor(
    private readonly store: BatchStore,
    private readonly calls: CallService,
    private readonly admission: WorkspaceAdmission,
    private readonly jobs: JobQueue,
    private readonly events: BatchCompletedPublisher,
    private readonly clock: Clock,
    private readonly opts: EngineOptions,
    private readonly log: Logger,
    private readonly destinations: DestinationService,
    private readonly doNotCall: Pick<DoNotCallService, 'listedAmong'>,
  ) {}

  register(): void {
    this.jobs.register(DISPATCH_JOB, (p) => this.dispatch(p.batch_id));
    this.jobs.register(SLOTS_JOB, (p) => this.slotsFreed(p.workspace_id));
  }

  /** Asks for a dispatch round (with `trx`, once it commits); asks while one is pending join it. */
  wake(batchId: string, trx?: Knex.Transaction): Promise<void> {
    return this.jobs.change({ add: [this.wakeJob(batchId)] }, trx);
  }

  private wakeJob(batchId: string): JobAdd {
    const runAt = new Date(this.clock.now().getTime() + this.opts.wakeDelayMs);
    return jobAdd(DISPATCH_JOB, { batch_id: batchId }, { runAt, keyMode: 'preserve_run_at' });
  }

  private setTimer(trx: Knex.Transaction, batchId: string, at: Date): Promise<void> {
    return this.jobs.add(TIMER_JOB, { batch_id: batchId }, { runAt: at }, trx);
  }

  /** Whether the batch's calls can be placed now: its agent and provider, and the workspace's billing. */
  private async readiness(batch: BatchRow): Promise<Readiness> {
    const plan = await this.calls.planOrRefusal(batch.workspace_id, { agent_id: batch.agent_id, agent_version: batch.agent_version, provider: batch.provider });
    if (isRefusal(plan)) return { refusal: plan.code };
    const billing = await this.calls.billing(batch.workspace_id);
    if (isRefusal(billing)) return { refusal: billing.code };
    return { plan, limit: billing.concurrent_session_limit, workspacePlan: billing.plan };
  }

  /** One dispatch round (the job's handler). */
  async dispatch(batchId: string): Promise<void> {
    if (this.opts.overloaded()) {
      const runAt = new Date(this.clock.now().getTime() + this.opts.capacityRetryMs);
      await this.jobs.add(DISPATCH_JOB, { batch_id: batchId }, { runAt, keyMode: 'preserve_run_at' });
      return;
    }
    if ((await this.round(batchId)) === 'more') await this.wake(batchId);
  }

  /**
   * The workspace's line of batches waiting for a slot, oldest first: their rounds run until one
   * comes up short (it re-arms this job and goes to the back of the line).
   */
  async slotsFreed(workspaceId: string): Promise<void> {
    if (this.opts.overloaded()) {
      const runAt = new Date(this.clock.now().getTime() + this.opts.capacityRetryMs);
      await this.jobs.add(SLOTS_JOB, { workspace_id: workspaceId }, { runAt, keyMode: 'preserve_run_at' });
      return;
    }
    const waiting = await this.store.waitingForSlots(workspaceId, SLOT_ROUNDS_PER_JOB);
    for (const batchId of waiting) {
      const outcome = await this.round(batchId);
      if (outcome === 'more') await this.wake(batchId);
      if (outcome === 'short') return;
    }
    if (waiting.length === SLOT_ROUNDS_PER_JOB) await this.jobs.add(SLOTS_JOB, { workspace_id: workspaceId });
  }

  private async round(batchId: string): Promise<RoundOutcome> {
    const peek = await this.store.get(batchId);
    if (!peek) return 'done';
    const dialing = peek.status === 'queued' || peek.status === 'in_progress' || peek.status === 'scheduled';
    const ready = dialing && peek.scheduled_at <= this.clock.now() ? await this.readiness(peek) : undefined;
    return this.store.knex.transaction(async (trx): Promise<RoundOutcome> => {
      let batch = await this.store.lock(trx, batchId);
      if (!batch) return 'done';
      const now = this.clock.now();
      // Out of the workspace's line; a round that comes up short joins it again, at the back.
      if (batch.slot_wait_since) batch = await this.store.update(trx, batchId, { slot_wait_since: null });
      if (batch.status === 'scheduled') {
        if (batch.scheduled_at > now) {
          await this.setTimer(trx, batchId, batch.scheduled_at);
          return 'done';
        }
        batch = await this.store.update(trx, batchId, { status: 'queued' });
      }
      if (batch.status !== 'queued' && batch.status !== 'in_progress') {
        await this.settle(trx, batch);
        return 'done';
      }
      if (!ready) return 'more'; // it became dialable since the peek: look again
      if ('refusal' in ready) {
        await this.fail(trx, batch, ready.refusal);
        return 'done';
      }
      await this.store.markDue(trx, batchId, now);
      const { live } = await this.store.progress(trx, batchId);
      // The destination policy's daily cap (the calls trigger refuses an insert past it).
      const today = await this.destinations.headroom(batch.workspace_id, trx);
      const room = Math.min(batch.concurrency - live, this.opts.chunk, today.remaining ?? Infinity);
      let started = 0;
      let short = false;
      let skippedMore = false;
      if (room > 0) {
        const { callable: claimed, more } = await this.claimCallable(trx, batch, now, room);
        skippedMore = more;
        const recordingChoice = batch.recording_enabled;
        const conversationChoice = batch.conversation;
        const callIds = claimed.map(() => newId('call'));
        const ask = this.admission.ask(ready.workspacePlan, this.calls.reservationTerms);
        started = (await this.admission.slots.admitFixedIn(trx, callIds, batch.workspace_id, ready.limit, this.calls.slotTtlMs, ask)).taken;
        short = started < claimed.length;
        const taken = claimed.slice(0, started).map((r, i) => ({ recipient: r, callId: callIds[i] }));
        await this.calls.insertQueued(
          ready.plan,
          taken.map(({ recipient: r, callId }) => ({
            callId,
            to: r.to_number,
            variables: r.variables,
            firstMessage: r.first_message,
            batchId,
            recording: recordingChoice,
            conversation: combinedOverride(conversationChoice, r.conversation),
            // markDialing below counts this attempt; the unique key refuses a second call for it.
            attempt: { recipientId: r.id, number: r.attempts + 1 },
          })),
          trx,
        );
        await this.store.markDialing(
          trx,
          taken.map(({ recipient, callId }) => ({ id: recipient.id, call_id: callId })),
        );
        if (started > 0 && batch.status === 'queued') batch = await this.store.update(trx, batchId, { status: 'in_progress' });
        if (started > 0) this.log.info({ batchId, started }, 'batch calls queued');
      }
      if (await this.settle(trx, batch)) return 'done';
      if (today.remaining !== null && started >= today.remaining) {
        // The day's calls are used up: the rest wait for the next UTC day.
        await this.setTimer(trx, batchId, today.resetsAt);
        return 'done';
      }
      if (short) {
        // No free slot of the workspace: wait in its line for its one job (an earlier pending one keeps its time).
        await this.store.update(trx, batchId, { slot_wait_since: now });
        const at = new Date(now.getTime() + this.opts.capacityRetryMs);
        await this.jobs.add(SLOTS_JOB, { workspace_id: batch.workspace_id }, { runAt: at, keyMode: 'preserve_run_at' }, trx);
        return 'short';
      }
      // The chunk filled and the batch has room left: another round at once.
      if (started === this.opts.chunk && batch.concurrency - live > started) return 'more';
      // Its passes skipped listed numbers until they ran out: the rest of what is due, at once.
      if (skippedMore && started < room) return 'more';
      const next = await this.store.nextDue(trx, batchId, now);
      if (next) await this.setTimer(trx, batchId, next);
      return 'done';
    });
  }

  /**
   * Up to `room` claimed recipients to dial now. Those whose number is on the workspace's do-not-call
   * list, as this transaction sees it (so every instance agrees: a number listed anywhere before this
   * round's check is never dialed), are canceled with `do_not_call` and others claimed in their place.
   * `more`: the passes ran out while still skipping (due recipients may be left for another round).
   */
  private async claimCallable(trx: Knex.Transaction, batch: BatchRow, now: Date, room: number): Promise<{ callable: RecipientRow[]; more: boolean }> {
    const callable: RecipientRow[] = [];
    let more = false;
    for (let pass = 0; pass < MAX_CLAIM_PASSES && callable.length < room; pass++) {
      const rows = await this.claimInWindow(
        trx,
        batch,
        now,
        room - callable.length,
        callable.map((r) => r.id),
      );
      if (!rows.length) {
        more = false;
        break;
      }
      const listed = await this.doNotCall.listedAmong(batch.workspace_id, [...new Set(rows.map((r) => r.to_number))], trx);
      const skipped = rows.filter((r) => listed.has(r.to_number)).map((r) => r.id);
      await this.store.cancelListed(trx, skipped);
      if (skipped.length) this.log.info({ batchId: batch.id, skipped: skipped.length }, 'batch recipients on the do-not-call list skipped');
      callable.push(...rows.filter((r) => !listed.has(r.to_number)));
      more = skipped.length > 0;
      if (!more) break;
    }
    return { callable, more };
  }

  /**
   * Up to `room` due recipients that may be called now; those outside the calling window wait for it.
   * A later pass excludes the rows this transaction already claimed (`except`, and those of earlier
   * passes): SKIP LOCKED skips other transactions' locks, not its own, and the claimed rows stay
   * waiting until markDialing.
   */
  private async claimInWindow(trx: Knex.Transaction, batch: BatchRow, now: Date, room: number, except: string[]): Promise<RecipientRow[]> {
    const window = batch.calling_window;
    if (!window) return this.store.claimDue(trx, batch.id, now, room, except);
    const inside: RecipientRow[] = [];
    for (let pass = 0; pass < MAX_CLAIM_PASSES && inside.length < room; pass++) {
      const rows = await this.store.claimDue(trx, batch.id, now, room - inside.length, [...except, ...inside.map((r) => r.id)]);
      if (!rows.length) break;
      const later: Array<{ id: string; at: Date }> = [];
      for (const r of rows) {
        const opens = nextOpening(window, now, r.timezone ?? undefined);
        if (opens.getTime() > now.getTime()) later.push({ id: r.id, at: opens });
        else inside.push(r);
      }
      await this.store.postpone(trx, later);
    }
    return inside;
  }

  /** The batch cannot go on: waiting recipients fail with the reason; live calls run to their end. */
  private async fail(trx: Knex.Transaction, batch: BatchRow, reason: string): Promise<void> {
    this.log.warn({ batchId: batch.id, reason }, 'batch failed');
    await this.store.closeWaiting(trx, batch.id, 'failed', reason);
    const failed = await this.store.update(trx, batch.id, { status: 'failed', failure_reason: reason });
    await this.settle(trx, failed);
  }

  /**
   * Ends the batch when nothing is left to do: a running or paused batch whose recipients are all
   * terminal completes; a canceled or failed one reports once its last live call has ended. Returns
   * whether `batch.completed` was raised now.
   */
  async settle(trx: Knex.Transaction, batch: BatchRow): Promise<boolean> {
    if (batch.completed_at) return false;
    const { live, open } = await this.store.progress(trx, batch.id);
    const terminal = TERMINAL_BATCH.includes(batch.status);
    if (terminal ? live > 0 : open > 0 || batch.status === 'scheduled') return false;
    const done = await this.store.update(trx, batch.id, { status: terminal ? batch.status : 'completed', completed_at: this.clock.now() });
    const counts = (await this.store.counts([batch.id], trx)).get(batch.id)!;
    await this.events.batchCompleted(
      {
        workspaceId: done.workspace_id,
        batchId: done.id,
        webhookUrl: done.webhook_url,
        payload: {
          batch_id: done.id,
          agent_id: done.agent_id,
          agent_version: done.agent_version,
          name: done.name,
          status: done.status as 'completed' | 'canceled' | 'failed',
          total: done.total,
          ...counts,
          created_at: done.created_at,
          completed_at: done.completed_at!,
        },
      },
      trx,
    );
    this.log.info({ batchId: done.id, status: done.status, ...counts }, 'batch completed');
    return true;
  }

  /**
   * In the transaction that makes one of the batch's calls terminal: the recipient takes the call's
   * outcome, or waits for another attempt when the retry policy asks; then a round is woken (the
   * job returned, which the finaliser adds with its own job changes in one statement).
   */
  async callEnded(call: CallRow, trx: Knex.Transaction): Promise<JobAdd[]> {
    if (!call.batch_id) return [];
    const ending = await this.store.endingCall(trx, call.batch_id, call.id);
    if (!ending || ending.recipient.status !== 'dialing') return [];
    const { batch, recipient } = ending;
    const outcome = call.status as RecipientStatus;
    const lastError = outcome === 'completed' ? null : outcome === 'failed' || outcome === 'canceled' ? (call.end_reason ?? outcome) : outcome;
    const stillRunning = !TERMINAL_BATCH.includes(batch.status);
    const retried =
      stillRunning &&
      recipient.round_attempts < batch.retry_max_attempts &&
      ((batch.retry_on as string[]).includes(outcome) ||
        (outcome === 'voicemail' && (await this.store.agentRetriesVoicemail(trx, batch.agent_id, call.agent_version))));
    const endedAt = call.ended_at ? new Date(call.ended_at) : this.clock.now();
    await this.store.updateRecipient(
      trx,
      recipient.id,
      retried
        ? { status: 'scheduled', outcome, last_error: lastError, next_attempt_at: new Date(endedAt.getTime() + batch.retry_delay_s * 1000) }
        : { status: outcome, outcome, last_error: lastError, next_attempt_at: null },
    );
    return [this.wakeJob(batch.id)];
  }
}
