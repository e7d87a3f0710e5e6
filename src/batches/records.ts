/** Batch rows as the contract shows them: the create answer, a list item, the detail with recipients. */
import type { components } from '../../generated/openapi.js';
import type { BatchRow, Counts, RecipientRow } from './store.js';

export type Batch = components['schemas']['Batch'];
export type BatchSummary = components['schemas']['BatchSummary'];
export type BatchDetail = components['schemas']['BatchDetail'];
type BatchRecipient = components['schemas']['BatchRecipient'];

const iso = (d: Date | string) => new Date(d).toISOString();
const isoOrNull = (d: Date | string | null) => (d === null ? null : iso(d));

export function toBatch(row: BatchRow): Batch {
  return {
    batch_id: row.id,
    agent_id: row.agent_id,
    agent_version: row.agent_version,
    name: row.name,
    status: row.status,
    total: row.total,
    skipped: { count: row.skipped.length, items: row.skipped },
    created_at: iso(row.created_at),
    provider: row.provider,
    scheduled_at: iso(row.scheduled_at),
    webhook_url: row.webhook_url,
    concurrency: row.concurrency,
    retry_policy: { max_attempts: row.retry_max_attempts, delay_seconds: row.retry_delay_s, retry_on: row.retry_on },
    calling_window: row.calling_window,
  };
}

export function toSummary(row: BatchRow, counts: Counts): BatchSummary {
  return { ...toBatch(row), ...counts, completed_at: isoOrNull(row.completed_at) };
}

function toRecipient(r: RecipientRow): BatchRecipient {
  return {
    recipient_id: r.id,
    to_number: r.to_number,
    variables: r.variables,
    first_message: r.first_message,
    timezone: r.timezone,
    conversation: r.conversation,
    status: r.status,
    attempts: r.attempts,
    call_id: r.call_id,
    call_ids: r.call_ids,
    outcome: r.outcome as BatchRecipient['outcome'],
    last_error: r.last_error,
    next_attempt_at: r.status === 'pending' || r.status === 'scheduled' ? isoOrNull(r.next_attempt_at) : null,
    updated_at: iso(r.updated_at),
  };
}

export function toDetail(row: BatchRow, counts: Counts, recipients: RecipientRow[]): BatchDetail {
  return { ...toSummary(row, counts), recipients: recipients.map(toRecipient) };
}
