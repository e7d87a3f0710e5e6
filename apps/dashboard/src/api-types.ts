/** The contract's types (generated/openapi.d.ts, from openapi/ by `npm run generate`). */
import type { components, paths } from '../../../generated/openapi.js';

export type { paths };
export type Schemas = components['schemas'];

import type {
  LiveDtmfEvent,
  LiveEndEvent,
  LiveIdleEvent,
  LiveInterruptedEvent,
  LiveStatusEvent,
  LiveToolCallEvent,
  LiveToolResultEvent,
  LiveTransferEvent,
  LiveTranscriptEvent,
} from '../../../generated/asyncapi-types.js';

/** One event of a conversation's live stream (GET .../events; the AsyncAPI `conversationEvents` messages). */
export type LiveEvent =
  | LiveStatusEvent
  | LiveTranscriptEvent
  | LiveToolCallEvent
  | LiveToolResultEvent
  | LiveInterruptedEvent
  | LiveTransferEvent
  | LiveDtmfEvent
  | LiveIdleEvent
  | LiveEndEvent;
