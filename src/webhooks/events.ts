/**
 * The internal entry point for raising webhook events. `publish` takes any kind of the AsyncAPI
 * document with the payload its message types, validates it against the message's schema, records
 * the event and one outbox row per target in one transaction, wakes the dispatcher and returns: it
 * never waits for a delivery. Once it returns, the event survives a crash (the dispatcher of this or
 * another instance sends it). A new kind is one message in the AsyncAPI document and one `publish`
 * call; the methods below are the four kinds of the spec, their payloads built in the contract's
 * field order (payloads.ts).
 */
import type { Knex } from 'knex';
import { webhookEvents, type WebhookEventPayloads } from '../../generated/asyncapi-types.js';
import { newId } from '../lib/ids.js';
import {
  batchCompletedPayload,
  callCompletedPayload,
  callStatusChangedPayload,
  callTranscriptPayload,
  type BatchCompletedInput,
  type CallCompletedInput,
  type CallStatusChangedInput,
  type CallTranscriptInput,
  type EventKind,
  validateEventPayload,
} from './payloads.js';
import type { WebhookStore } from './store.js';
import { urlKey } from './url-key.js';

/** Whose event it is and where it goes besides the workspace's webhooks that list its kind. */
export interface EventTarget {
  workspaceId: string;
  callId: string | null;
  batchId: string | null;
  /** The call's or batch's own `webhook_url`; never used for opt-in kinds. */
  webhookUrl: string | null;
}

export interface RaisedEvent {
  eventId: string;
  /** Number of targets the event will be delivered to. */
  targets: number;
}

/** What a conversation domain needs of the publisher to report a finished call or session. */
export type CallCompletedPublisher = Pick<EventPublisher, 'callCompleted'>;
/** What a phone call needs of the publisher to report its live events to the webhooks that list them. */
export type CallLivePublisher = Pick<EventPublisher, 'callStatusChanged' | 'callTranscript' | 'listens'>;
/** What a test run needs of the publisher. */
export type TestRunCompletedPublisher = Pick<EventPublisher, 'testRunCompleted'>;
/** What the batch engine needs of the publisher. */
export type BatchCompletedPublisher = Pick<EventPublisher, 'batchCompleted'>;

export class EventPublisher {
  constructor(
    private readonly store: WebhookStore,
    private readonly wake: () => void,
  ) {}

  /** An event of any kind: its payload is typed by the kind's AsyncAPI message and validated against it. */
  async publish<K extends EventKind>(kind: K, target: EventTarget, payload: WebhookEventPayloads[K], trx?: Knex.Transaction): Promise<RaisedEvent> {
    validateEventPayload(kind, payload);
    return this.raise(kind, target.workspaceId, target.callId, target.batchId, target.webhookUrl, JSON.stringify(payload), trx);
  }

  /**
   * A phone call or web session ended. `webhookUrl` is the call's own `webhook_url` (null for web
   * sessions and for calls placed by a batch); `batchId` the batch that placed the call, if any.
   */
  async callCompleted(
    input: { workspaceId: string; callId: string | null; webhookUrl: string | null; payload: CallCompletedInput; batchId?: string | null },
    trx?: Knex.Transaction,
  ): Promise<RaisedEvent> {
    const payload = callCompletedPayload(input.payload);
    return this.raise('call.completed', input.workspaceId, input.callId, input.batchId ?? null, input.webhookUrl, JSON.stringify(payload), trx);
  }

  /** A batch reached a terminal state. `webhookUrl` is the batch's own `webhook_url`. */
  async batchCompleted(
    input: { workspaceId: string; batchId: string; webhookUrl: string | null; payload: BatchCompletedInput },
    trx?: Knex.Transaction,
  ): Promise<RaisedEvent> {
    const payload = batchCompletedPayload(input.payload);
    return this.raise('batch.completed', input.workspaceId, null, input.batchId, input.webhookUrl, JSON.stringify(payload), trx);
  }

  /**
   * A test run completed: to the webhooks that list `test_run.completed` (an opt-in kind) and to the
   * run's own `webhook_url`, which is given for this event alone (unlike a call's, which an opt-in kind
   * never reaches).
   */
  async testRunCompleted(
    input: { workspaceId: string; webhookUrl: string | null; payload: WebhookEventPayloads['test_run.completed'] },
    trx?: Knex.Transaction,
  ): Promise<RaisedEvent> {
    validateEventPayload('test_run.completed', input.payload);
    return this.raise('test_run.completed', input.workspaceId, null, null, input.webhookUrl, JSON.stringify(input.payload), trx, true);
  }

  /** Whether a webhook of the workspace lists `kind` (so a caller with many events skips building them). */
  listens(workspaceId: string, kind: EventKind, trx?: Knex.Transaction): Promise<boolean> {
    return this.store.listens(workspaceId, kind, trx);
  }

  /**
   * A phone call moved on: recorded (in `trx`, with the move) only when a webhook of the workspace
   * lists `call.status_changed`; never to the call's own `webhook_url`.
   */
  async callStatusChanged(input: { workspaceId: string; payload: CallStatusChangedInput }, trx?: Knex.Transaction): Promise<RaisedEvent> {
    const payload = callStatusChangedPayload(input.payload);
    return this.raise('call.status_changed', input.workspaceId, payload.call_id, payload.batch_id, null, JSON.stringify(payload), trx);
  }

  /** An utterance of a phone call finished: as callStatusChanged, for webhooks listing `call.transcript`. */
  async callTranscript(input: { workspaceId: string; batchId: string | null; payload: CallTranscriptInput }, trx?: Knex.Transaction): Promise<RaisedEvent> {
    const payload = callTranscriptPayload(input.payload);
    return this.raise('call.transcript', input.workspaceId, payload.call_id, input.batchId, null, JSON.stringify(payload), trx);
  }

  /** With `trx`, the event commits with the caller's transaction (NOTIFY wakes the dispatchers then). */
  private async raise(
    kind: EventKind,
    workspaceId: string,
    callId: string | null,
    batchId: string | null,
    webhookUrl: string | null,
    body: string,
    trx?: Knex.Transaction,
    /** `webhookUrl` is the event's own receiver even for an opt-in kind (a test run's). */
    ownForOptIn = false,
  ): Promise<RaisedEvent> {
    const eventId = newId('event');
    const own = webhookUrl && (ownForOptIn || !webhookEvents[kind].optIn) ? { url: webhookUrl, urlKey: urlKey(webhookUrl) } : null;
    const targets = await this.store.recordEvent(
      { id: eventId, workspaceId, kind, callId, batchId, body, ownTarget: own },
      () => newId('webhookDelivery'),
      trx,
    );
    if (targets > 0) this.wake();
    return { eventId, targets };
  }
}
