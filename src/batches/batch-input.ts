import type { Provider } from '../carriers/carrier.js';
import type { CallingWindow } from './calling-window.js';
import type { RecipientInput } from './recipients.js';
import type { RetryOutcome } from './store.js';
import type { ConversationSettingsInput } from '../voice/conversation-settings.js';

/** A batch to create, from either path (the CSV path's rows already read). */
export interface BatchInput {
  agent_id: string;
  /** The agent version the batch's calls run; omitted: the one published at creation. */
  agent_version?: number;
  name: string;
  recipients: Array<RecipientInput & { index: number }>;
  provider?: Provider;
  scheduled_at?: string;
  webhook_url?: string;
  recording?: { enabled: boolean } | null;
  /** Overrides the agent's conversation settings for the batch's calls (src/conversation/settings.ts). */
  conversation?: ConversationSettingsInput | null;
  concurrency?: number;
  retry_policy?: { max_attempts?: number; delay_seconds?: number; retry_on?: RetryOutcome[] };
  calling_window?: CallingWindow;
}
