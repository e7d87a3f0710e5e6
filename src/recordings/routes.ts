/** Handlers of the Recordings operations (thin: the rules are in service.ts; the call's ownership in calls/service.ts). */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { RecordingService } from './service.js';

/** What the handlers read of a call: recordings sit below calls, which record through them. */
interface RecordedCall {
  id: string;
  recording_enabled: boolean;
}

export interface RecordedCalls {
  /** The call of this workspace (404/403 otherwise). */
  owned(workspaceId: string, callId: string): Promise<RecordedCall>;
  /** The call whatever its workspace (a signed link names it), 404 when none. */
  any(callId: string): Promise<RecordedCall>;
}

export function recordingRoutes(recordings: RecordingService, calls: RecordedCalls): Handlers {
  return {
    getCallRecording: async (req) => {
      const call = await calls.owned(workspaceOf(req.auth), req.params.call_id);
      const wav = await recordings.wav(call.id, call.recording_enabled, req.headers.range);
      return { status: wav.status, headers: wav.headers, body: wav.body as never, type: 'audio/wav' };
    },
    downloadSignedRecording: async (req) => {
      recordings.checkLink(req.params.call_id, req.query.expires, req.query.signature);
      const call = await calls.any(req.params.call_id);
      const wav = await recordings.wav(call.id, call.recording_enabled, req.headers.range);
      return { status: wav.status, headers: wav.headers, body: wav.body as never, type: 'audio/wav' };
    },
    deleteCallRecording: async (req) => {
      const call = await calls.owned(workspaceOf(req.auth), req.params.call_id);
      await recordings.remove(call.id, call.recording_enabled);
      return { status: 200, body: { call_id: call.id, deleted: true } };
    },
    getRecordingSettings: async (req) => ({ status: 200, body: await recordings.settings(workspaceOf(req.auth)) }),
    updateRecordingSettings: async (req) => ({ status: 200, body: await recordings.updateSettings(workspaceOf(req.auth), req.body) }),
  };
}
