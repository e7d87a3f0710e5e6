/** What both simulated carriers share: the number rules, the call plan, and the server's state. */
import type { CallContext, CallPlan, SimCall } from './call.js';
import { DEFAULT_PERSON, FRONT_DESK, OPTING_OUT_PERSON, PIN_CALLER, type CalleeScript } from './callee.js';
import type { CallOutcome, SandboxProvider } from './records.js';

export const E164 = /^\+[1-9][0-9]{1,14}$/;

/** The callee an outbound call to `to` meets, by its last four digits. */
export function calleeOf(to: string): CallPlan['callee'] | 'refused' {
  if (to.endsWith('0001')) return 'voicemail';
  if (to.endsWith('0002')) return 'busy';
  if (to.endsWith('0003')) return 'no_answer';
  if (to.endsWith('0004')) return 'refused';
  if (to.endsWith('0005')) return 'menu';
  return 'person';
}

export function outcomeOf(callee: CallPlan['callee']): CallOutcome {
  return callee === 'person' || callee === 'menu' ? 'human' : callee;
}

/** Numbers that exist in the sandbox: every well-formed E.164 number but the refused ones. */
export function numberExists(number: string): boolean {
  return E164.test(number) && calleeOf(number) !== 'refused';
}

export interface RingInput {
  provider: SandboxProvider;
  from: string;
  to: string;
  script?: CalleeScript;
}

export interface CarrierContext extends CallContext {
  ringMs: number;
  /** Cap on the wait of a no-answer callee (ms), or null for the dial request's timeout. */
  noAnswerMs: number | null;
  callbacksEnabled(): boolean;
  scriptFor(to: string): CalleeScript | null;
  /** Aborted when the sandbox shuts down (outgoing requests stop). */
  shutdown: AbortSignal;
  track(call: SimCall): void;
}

/** How long an unanswered inbound call rings before the caller gives up. */
export const INBOUND_GIVE_UP_MS = 30_000;

export function outboundPlan(ctx: CarrierContext, to: string, ringTimeoutMs: number, timeLimitMs: number): CallPlan {
  const callee = calleeOf(to) as CallPlan['callee'];
  return {
    callee,
    script: ctx.scriptFor(to) ?? (callee === 'menu' ? FRONT_DESK : to.endsWith('0007') ? OPTING_OUT_PERSON : DEFAULT_PERSON),
    ringMs: ctx.ringMs,
    ringTimeoutMs,
    noAnswerMs: Math.min(ringTimeoutMs, ctx.noAnswerMs ?? Infinity),
    timeLimitMs,
  };
}

/** The caller of an inbound call from `from` with no script given: the PIN caller from a number ending in 0006. */
export function callerOf(from: string): CalleeScript {
  return from.endsWith('0006') ? PIN_CALLER : DEFAULT_PERSON;
}

export function inboundPlan(script: CalleeScript | undefined, timeLimitMs: number, from: string): CallPlan {
  return {
    callee: 'person',
    script: script ?? callerOf(from),
    ringMs: 0,
    ringTimeoutMs: INBOUND_GIVE_UP_MS,
    noAnswerMs: INBOUND_GIVE_UP_MS,
    timeLimitMs,
  };
}

/** Both carriers' default TimeLimit / time_limit_secs: four hours. */
export const DEFAULT_TIME_LIMIT_S = 14_400;
