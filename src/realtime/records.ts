/**
 * Reads of finished web sessions (getRealtimeConversation, listRealtimeConversations): the stored
 * conversation record as the RealtimeConversation schema, i.e. the fields of the session's
 * `call.completed` with the same values (its recording as it is now, with a fresh link), plus user_id,
 * source and ended_at; and a session, finished or live, as its recording's routes see it.
 */
import type { components } from '../../generated/openapi.js';
import { notFound, otherWorkspace } from '../errors/api-error.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { ConversationRow, RealtimeStore } from './store.js';
import type { ToolCallRecord } from '../../generated/asyncapi-types.js';
import { callCompletedPayload, type CallCompletedInput } from '../webhooks/payloads.js';
import type { RecordedConversation, RecordingService, RecordingView } from '../recordings/service.js';
import type { RecordedConversations } from '../recordings/routes.js';

export type RealtimeConversation = components['schemas']['RealtimeConversation'];

export function conversationNotFound(id: string) {
  return notFound('conversation_not_found', `No web session ${id.slice(0, 64)}.`, 'conversation_id');
}

/**
 * The facts of a finished session as call.completed states them (one mapping for the event and the
 * reads); `recording`: the session's recording, null when it has none (the fields are then absent).
 */
export function sessionCallFacts(row: ConversationRow, recording: RecordingView | null): CallCompletedInput {
  return {
    ...(recording ? { recording: recording.recording, recording_url: recording.recording_url } : {}),
    conversation_id: row.id,
    call_sid: null,
    agent_id: row.agent_id,
    agent_version: row.agent_version ?? null,
    to_number: null,
    provider: 'web',
    first_message: row.first_message,
    first_message_delivered: row.first_message_delivered,
    variables: row.variables,
    duration: row.duration,
    status: row.status,
    message_count: row.message_count,
    transcript: row.transcript,
    transcript_truncated: row.transcript_truncated,
    summary: row.summary,
    sentiment: row.sentiment,
    goal_met: row.goal_met,
    needs_review: row.needs_review,
    unanswered_questions: row.unanswered_questions,
    interruption_count: row.interruption_count,
    latency_avg_ms: Number(row.latency_avg_ms),
    created_at: new Date(row.started_at),
    tool_calls: (row.tool_calls as ToolCallRecord[] | null) ?? null,
    ...row.analysis_results,
  };
}

/** The record as the API shows it: its call.completed fields with the same values, plus user_id, source and ended_at. */
export function toConversation(row: ConversationRow, recording: RecordingView | null): RealtimeConversation {
  if (row.erased_at) return tombstone(row);
  const { event: _event, ...fields } = callCompletedPayload(sessionCallFacts(row, recording));
  return {
    ...fields,
    user_id: row.user_id,
    source: row.source,
    end_reason: row.end_reason,
    ended_at: new Date(row.ended_at).toISOString(),
    erased_at: null,
  } as RealtimeConversation;
}

/** An erased session (src/erasure): what billing and usage need, its content empty or null. */
function tombstone(row: ConversationRow): RealtimeConversation {
  return {
    conversation_id: row.id,
    call_sid: null,
    agent_id: row.agent_id,
    agent_version: row.agent_version ?? null,
    to_number: null,
    provider: 'web',
    first_message: null,
    first_message_delivered: row.first_message_delivered,
    variables: {},
    duration: row.duration,
    status: row.status,
    message_count: 0,
    transcript: [],
    transcript_truncated: row.transcript_truncated,
    summary: null,
    sentiment: null,
    goal_met: null,
    needs_review: null,
    unanswered_questions: [],
    interruption_count: row.interruption_count,
    latency_avg_ms: Number(row.latency_avg_ms),
    created_at: new Date(row.started_at).toISOString(),
    user_id: row.user_id,
    source: row.source,
    end_reason: row.end_reason,
    ended_at: new Date(row.ended_at).toISOString(),
    erased_at: new Date(row.erased_at!).toISOString(),
  };
}

export class ConversationRecords {
  constructor(
    private readonly store: RealtimeStore,
    /** The sessions' recordings (null: recordings are not set up). */
    private readonly recordings: Pick<RecordingService, 'viewsOf'> | null,
  ) {}

  private async views(ids: string[]): Promise<Map<string, RecordingView>> {
    return this.recordings ? this.recordings.viewsOf(ids) : new Map();
  }

  async get(workspaceId: string, id: string): Promise<RealtimeConversation> {
    const row = await this.store.getConversation(id);
    if (!row) throw conversationNotFound(id);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('web session');
    return toConversation(row, (await this.views([row.id])).get(row.id) ?? null);
  }

  async list(workspaceId: string, query: Record<string, unknown>): Promise<Page<RealtimeConversation>> {
    const params = query as PageParams & { agent_id?: string; user_id?: string };
    const page = await this.store.listConversations(workspaceId, params);
    const views = await this.views(page.data.map((r) => r.id));
    return { ...page, data: page.data.map((r) => toConversation(r, views.get(r.id) ?? null)) };
  }
}

/** Web sessions, finished or live, as their recording's routes see them (404 `conversation_not_found`, 403 another workspace's). */
export function recordedSessions(store: RealtimeStore): RecordedConversations {
  const find = async (id: string) => {
    const row = await store.recordedSession(id);
    if (!row) throw conversationNotFound(id);
    return row;
  };
  const recorded = (row: { id: string; recording_enabled: boolean; erased_at?: Date | null }): RecordedConversation => ({
    id: row.id,
    kind: 'web_session',
    recordingEnabled: row.recording_enabled,
    erased: Boolean(row.erased_at),
  });
  return {
    owned: async (workspaceId, id) => {
      const row = await find(id);
      if (row.workspace_id !== workspaceId) throw otherWorkspace('web session');
      return recorded(row);
    },
    any: async (id) => recorded(await find(id)),
  };
}
