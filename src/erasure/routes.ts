/** Handlers of the erasure operations (thin: the rules are in service.ts and store.ts). */
import type { components } from '../../generated/openapi.js';
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { ConversationKind, ErasureService } from './service.js';

/** A kind of conversation as erasure sees it: how it is refused, and how its record (the tombstone once erased) is read. */
export interface ErasableConversations<T> extends ConversationKind {
  get(workspaceId: string, id: string): Promise<T>;
}

export function erasureRoutes(
  erasure: ErasureService,
  calls: ErasableConversations<components['schemas']['Call']>,
  sessions: ErasableConversations<components['schemas']['RealtimeConversation']>,
): Handlers {
  return {
    deleteCall: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      await erasure.erase(calls, workspaceId, req.params.call_id);
      return { status: 200, body: await calls.get(workspaceId, req.params.call_id) };
    },
    deleteRealtimeConversation: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      await erasure.erase(sessions, workspaceId, req.params.conversation_id);
      return { status: 200, body: await sessions.get(workspaceId, req.params.conversation_id) };
    },
  };
}
