/**
 * The background work of calls, as job-queue tasks (src/jobs/queue.ts):
 * - `call_dial`: hands a queued call to its carrier, at most once: everything the request needs is
 *   read first, then one atomic claim (with the stream token) is written right before the request, so
 *   a crash never dials twice and only a crash during the carrier's answer leaves a dial unknown;
 * - `call_dial_in_process`: the same for a carrier running in-process (SIP), taken only by instances
 *   that run its stack;
 * - `call_deadline`: first runs when the dial grace is over. A call whose dial job never claimed it
 *   (the instance holding the job died; graphile-worker keeps a dead worker's jobs locked for hours)
 *   is dialed from there (the same atomic claim, so once); otherwise it ends a call nothing else ended
 *   in time (a carrier that never called back, an instance that died mid-call). A deadline that moved
 *   later (a live call's bridge renews it) is rescheduled instead.
 */
import type { Logger } from 'pino';
import { sha256Hex } from '../lib/tokens.js';
import type { Clock } from '../lib/clock.js';
import type { JobQueue } from '../jobs/queue.js';
import { CarrierError, MissingCredentialsError, type Carriers } from '../carriers/index.js';
import type { CallFinaliser } from './finaliser.js';
import type { CallAgents, CallTiming } from './dependencies.js';
import { DEADLINE_JOB, DIAL_JOB, IN_PROCESS_DIAL_JOB } from './job-kinds.js';
import { newStreamToken } from './stream-token.js';
import { carrierAgentId, isTerminal, type CallStore } from './store.js';

/** The carrier's own time limit is this much later than the bridge's, so the bridge's comes first. */
const CARRIER_TIME_LIMIT_MARGIN_S = 10;

export class CallJobs {
  constructor(
    private readonly store: CallStore,
    private readonly agents: CallAgents,
    private readonly carriers: Carriers,
    private readonly finaliser: CallFinaliser,
    private readonly jobs: JobQueue,
    private readonly clock: Clock,
    private readonly timing: CallTiming & { machineDetectionTimeoutS: number },
    private readonly log: Logger,
  ) {}

  register(): void {
    this.jobs.register(DIAL_JOB, (p) => this.dial(p.call_id));
    if (this.carriers.anyInProcess) this.jobs.register(IN_PROCESS_DIAL_JOB, (p) => this.dial(p.call_id));
    this.jobs.register(DEADLINE_JOB, (p) => this.deadline(p.call_id));
  }

  async dial(callId: string): Promise<void> {
    // The claim is the check: only a queued call never attempted and not asked to hang up is taken.
    const streamToken = newStreamToken();
    const call = await this.store.claimDial(callId, sha256Hex(streamToken));
    const log = this.log.child({ callId });
    if (!call) {
      if (await this.store.markListed(callId)) {
        log.info('number put on the do-not-call list since the call was created; not dialed');
        await this.finaliser.finalise(callId, { endReason: 'do_not_call' });
      }
      return;
    }
    const agent = await this.agents.findForRuntime(call.workspace_id, call.agent_id, call.agent_version);
    if (!agent) {
      log.warn('agent gone before dialing; the call fails');
      await this.finaliser.finalise(callId, { endReason: 'not_allowed' });
      return;
    }
    let credentials;
    try {
      credentials = this.carriers.credentialsOf(agent, call.provider);
    } catch (err) {
      if (!(err instanceof MissingCredentialsError)) throw err;
      await this.finaliser.finalise(callId, { endReason: 'not_allowed' });
      return;
    }
    const voicemail = agent.voicemailConfig;
    try {
      const { callSid } = await this.carriers.get(call.provider).rest.dial(credentials, {
        callId,
        from: call.from_number,
        to: call.to_number,
        streamToken,
        ringTimeoutS: this.timing.ringTimeoutS,
        // The bridge ends a call at its maximum length (end_reason time_limit); the carrier's limit is the backstop.
        timeLimitS: this.timing.maxDurationS + CARRIER_TIME_LIMIT_MARGIN_S,
        machineDetection: { timeoutS: voicemail?.detection_timeout_seconds ?? this.timing.machineDetectionTimeoutS },
      });
      // A callback may already have moved the call on; the sid is recorded whatever its live state (one statement).
      const row = await this.store.advance(call, { status: 'initiated' }, ['queued'], { call_sid: callSid });
      log.info({ provider: call.provider }, 'call dialed');
      // Asked to hang up meanwhile, or already ended (its deadline ran): the carrier's call goes too.
      if (!row || row.hangup_requested_at) {
        await this.carriers
          .get(call.provider)
          .rest.hangup(credentials, callSid, { answered: false })
          .catch((err) => log.warn({ err: (err as Error).message }, 'hang-up after dial failed'));
      }
    } catch (err) {
      if (!(err instanceof CarrierError)) throw err;
      log.warn({ kind: err.kind, detail: err.detail, message: err.message }, 'carrier refused the dial request');
      await this.store.update(callId, { carrier_outcome: 'failed' }, ['queued']);
      await this.finaliser.finalise(callId, { endReason: 'carrier_error' });
    }
  }

  async deadline(callId: string): Promise<void> {
    const call = await this.store.get(callId);
    if (!call || isTerminal(call.status)) return;
    if (call.status === 'queued' && !call.dial_attempted_at && !call.hangup_requested_at) {
      this.log.warn({ callId }, 'call not dialed within the dial grace (its dial job was lost or is late); dialing it now');
      await this.jobs.add(DEADLINE_JOB, { call_id: callId }, { runAt: new Date(call.deadline_at) });
      // A carrier whose stack this instance does not run: its dial job again, for an instance that does.
      if (this.carriers.dialsHere(call.provider)) await this.dial(callId);
      else await this.jobs.add(IN_PROCESS_DIAL_JOB, { call_id: callId });
      return;
    }
    const now = this.clock.now().getTime();
    const deadline = new Date(call.deadline_at).getTime();
    if (deadline > now + 250) {
      await this.jobs.add(DEADLINE_JOB, { call_id: callId }, { runAt: new Date(deadline) });
      return;
    }
    this.log.warn({ callId, status: call.status }, 'call deadline passed; ending it');
    if (call.call_sid) {
      try {
        const agent = await this.agents.findForRuntime(call.workspace_id, carrierAgentId(call));
        if (!agent) throw new MissingCredentialsError('the agent is gone');
        await this.carriers
          .get(call.provider)
          .rest.hangup(this.carriers.credentialsOf(agent, call.provider), call.call_sid, { answered: Boolean(call.answered_at) });
      } catch (err) {
        this.log.warn({ callId, err: (err as Error).message }, 'could not hang the overdue call up at the carrier');
      }
    }
    const done = await this.finaliser.finalise(callId, { forced: true });
    if (!done) {
      // Someone holds a claim on its finalisation: look again shortly (a dead claimant's claim goes stale).
      const again = await this.store.get(callId);
      if (again && !isTerminal(again.status)) {
        await this.jobs.add(DEADLINE_JOB, { call_id: callId }, { runAt: new Date(now + 30_000) });
      }
    }
  }
}
