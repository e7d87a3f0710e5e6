/**
 * What a carrier tells us about a call, in our words, and the carrier's side of answering it. Each
 * carrier's `callbacks.ts` reads its own messages (identify the call, verify the signature, translate
 * the message into one neutral CarrierEvent) and writes its own replies; src/calls/ sees only these
 * types. A message may come over HTTP (provider_a's and provider_b's webhooks, `CallbackRequest`) or
 * from an in-process user agent (a SIP INVITE, BYE or NOTIFY): the calls side takes a `CarrierMessage`
 * either way.
 */
import type { CarrierAccounts } from './credentials.js';
import type { AnsweredBy, CarrierOutcome } from './carrier.js';

/** The one neutral event a carrier's message becomes. */
export type CarrierEvent =
  /** A new call to one of our numbers (`to`): answer it with our media, or refuse it as busy. */
  | { kind: 'incoming'; from: string; to: string }
  /** An outbound call was answered and the carrier asks where its media goes. */
  | { kind: 'media_wanted' }
  /** The call moved on at the carrier. */
  | { kind: 'progress'; status: 'initiated' | 'ringing' | 'in_progress' }
  /** The call is over at the carrier: `outcome`, or `whenAnswered` for a call that was answered. */
  | { kind: 'ended'; outcome: CarrierOutcome; whenAnswered: CarrierOutcome }
  /** Answering-machine detection's verdict; `greetingEnded`: a machine's greeting is over too. */
  | { kind: 'answered_by'; answeredBy: AnsweredBy; greetingEnded: boolean }
  /** A machine's greeting is over (its beep). */
  | { kind: 'greeting_ended' }
  /** Nothing that changes the call (a status we do not use); its sequence number is still kept. */
  | { kind: 'noted' };

/** The result of checking a message's signature (or a SIP peer's credentials). */
export type SignatureCheck = 'ok' | 'invalid_signature' | 'signature_expired';

/** One message of a carrier, identified and translated but not yet trusted. */
export interface CarrierMessage {
  /** The call as the carrier names it: our call id when it echoes one, and its own id of the call. */
  call: { callId: string | null; callSid: string };
  /**
   * Set when the message is about a call to one of our numbers: the account answering `to` checks
   * it when the call is not known yet, or always when `always` (provider_a's voice webhook).
   */
  number: { to: string; always: boolean } | null;
  /** The carrier's id of this message, when it may deliver one twice (a repeat changes nothing). */
  eventId: string | null;
  /** The carrier's order of its reports about the call, when it numbers them. */
  seq: number | null;
  /** Checks the message against the account it must come from (null: no account; it fails). */
  verify(accounts: CarrierAccounts | null, nowS: number): SignatureCheck;
  /** The message as a neutral event, knowing whether we know the call. */
  event(known: boolean): CarrierEvent;
}

/** How we answer a message: connect the call's media, refuse it as busy, end it, or nothing. */
export type CallbackAction = { kind: 'connect'; callId: string; streamToken: string } | { kind: 'reject' } | { kind: 'hangup' } | { kind: 'none' };

/** What goes back to the carrier over HTTP (an in-process carrier ignores it). */
export type CallbackReply = { status: 200; body: string; type: string } | { status: 204 };

/** A carrier's HTTP callback as its signature covers it. */
export interface CallbackRequest {
  /** Path and query as called. */
  url: string;
  /** Our `call_id` query parameter, when the callback URL carries one. */
  callId: string | undefined;
  /** The body exactly as received. */
  rawBody: string;
  header(name: string): string | undefined;
}

/** A carrier's callbacks: its messages read, its replies written. */
export interface CarrierCallbacks {
  /** The contract operations (operationIds) of its HTTP callbacks; none for an in-process carrier. */
  readonly operations: readonly string[];
  /** Reads one HTTP callback of `operation`. */
  read(operation: string, req: CallbackRequest): CarrierMessage;
  /**
   * Carries out `action` for the message's call: as the HTTP answer (provider_a's TwiML) or by the
   * carrier's own command (provider_b's answer and reject), with the answering account's credentials.
   * Throws a CarrierError when the carrier refuses the command.
   */
  reply(operation: string, action: CallbackAction, ctx: { accounts: CarrierAccounts | null; callSid: string }): Promise<CallbackReply>;
}
