/**
 * Handlers of the Recordings operations, for phone calls and web sessions alike (thin: the rules are in
 * service.ts; whose conversation it is, in calls/service.ts and realtime/recorded.ts). Each kind has its
 * download (API key), its signed download (no key) and its delete; all three go through the same steps.
 */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { RecordedConversation, RecordingService } from './service.js';

/** How the handlers find a conversation of one kind: recordings sit below calls and web sessions, which record through them. */
export interface RecordedConversations {
  /** The conversation of this workspace (404/403 otherwise). */
  owned(workspaceId: string, id: string): Promise<RecordedConversation>;
  /** The conversation whatever its workspace (a signed link names it), 404 when none. */
  any(id: string): Promise<RecordedConversation>;
}

export function recordingRoutes(recordings: RecordingService, calls: RecordedConversations, sessions: RecordedConversations): Handlers {
  const wavReply = async (c: RecordedConversation, range: string | undefined) => {
    const wav = await recordings.wav(c, range);
    return { status: wav.status, headers: wav.headers, body: wav.body as never, type: 'audio/wav' };
  };
  /** The signed link's check comes first: a forged link learns nothing of the conversation. */
  const signed = async (of: RecordedConversations, id: string, kind: RecordedConversation['kind'], q: { expires: number; signature: string }) => {
    recordings.checkLink(id, kind, q.expires, q.signature);
    return of.any(id);
  };
  const remove = async (of: RecordedConversations, workspaceId: string, id: string) => {
    const c = await of.owned(workspaceId, id);
    await recordings.remove(c);
    return c.id;
  };
  return {
    getCallRecording: async (req) => wavReply(await calls.owned(workspaceOf(req.auth), req.params.call_id), req.headers.range),
    downloadSignedRecording: async (req) => wavReply(await signed(calls, req.params.call_id, 'phone_call', req.query), req.headers.range),
    deleteCallRecording: async (req) => ({ status: 200, body: { call_id: await remove(calls, workspaceOf(req.auth), req.params.call_id), deleted: true } }),
    getRealtimeConversationRecording: async (req) => wavReply(await sessions.owned(workspaceOf(req.auth), req.params.conversation_id), req.headers.range),
    downloadSignedRealtimeConversationRecording: async (req) =>
      wavReply(await signed(sessions, req.params.conversation_id, 'web_session', req.query), req.headers.range),
    deleteRealtimeConversationRecording: async (req) => ({
      status: 200,
      body: { conversation_id: await remove(sessions, workspaceOf(req.auth), req.params.conversation_id), deleted: true },
    }),
    getRecordingSettings: async (req) => ({ status: 200, body: await recordings.settings(workspaceOf(req.auth)) }),
    updateRecordingSettings: async (req) => ({ status: 200, body: await recordings.updateSettings(workspaceOf(req.auth), req.body) }),
  };
}
