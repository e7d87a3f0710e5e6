/**
 * Handlers of the Realtime operations: createRealtimeSession (it validates its own body, at step 5 of
 * the spec's check order) and the reads of finished web sessions.
 */
import type { Handlers } from '../contract/handlers.js';
import type { Contract } from '../http/contract.js';
import { credentialOf, workspaceOf } from '../contract/principal.js';
import { checkContentType } from '../http/router.js';
import { deferredBodyError } from '../http/deferred-body.js';
import { bodyValidationError } from '../http/validation.js';
import type { RealtimeService } from './service.js';
import type { ConversationRecords } from './records.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { components } from '../../generated/openapi.js';
import { otherWorkspace } from '../errors/api-error.js';
import { resumeAfter, type LiveEvents } from '../events/index.js';
import { conversationNotFound } from './records.js';
import { conversationErased } from '../events/index.js';
import type { RealtimeStore } from './store.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];

export function realtimeRoutes(
  service: RealtimeService,
  records: ConversationRecords,
  contract: Contract,
  bodyLimitBytes: number,
  deliveries: (workspaceId: string, conversationId: string, params: PageParams) => Promise<Page<WebhookDelivery>>,
): Handlers {
  const info = contract.operations.get('createRealtimeSession');
  if (!info) throw new Error('createRealtimeSession is missing from the contract');
  const validate = contract.validator(`${info.pointer}/requestBody/content/application~1json/schema`);
  return {
    createRealtimeSession: async (req) => {
      const body = await service.createSession(
        workspaceOf(req.auth),
        req.body,
        (b) => {
          const unreadable = deferredBodyError(req.ctx, bodyLimitBytes);
          if (unreadable) throw unreadable;
          checkContentType(req.ctx);
          if (b === undefined) {
            throw bodyValidationError([{ instancePath: '', schemaPath: '', keyword: 'required', params: { missingProperty: 'requestBody' } }], b);
          }
          if (!validate(b)) throw bodyValidationError(validate.errors ?? [], b);
        },
        // The credential a token is minted with: revoking it voids the token while unused.
        credentialOf(req.auth),
      );
      return { status: 201, body };
    },
    listRealtimeConversations: async (req) => ({ status: 200, body: await records.list(workspaceOf(req.auth), req.query) }),
    getRealtimeConversation: async (req) => ({ status: 200, body: await records.get(workspaceOf(req.auth), req.params.conversation_id) }),
    listRealtimeConversationWebhookDeliveries: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      // 404 / 403 for a session that does not exist or is another workspace's.
      await records.get(workspaceId, req.params.conversation_id);
      return { status: 200, body: await deliveries(workspaceId, req.params.conversation_id, req.query) };
    },
  };
}

/**
 * A web session's live event stream (Server-Sent Events), live or finished; authorised like
 * `getRealtimeConversation` (403 for another workspace's session, 404 for none).
 */
export function conversationEventRoutes(store: RealtimeStore, slots: { holder(id: string): Promise<string | undefined> }, live: LiveEvents): Handlers {
  return {
    streamRealtimeConversationEvents: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      const resume = resumeAfter(req.headers['last-event-id'], req.query.last_event_id);
      const id = req.params.conversation_id;
      // Live first: the live row goes in the transaction that writes the record, so one of the two is
      // found; just after admission (session_started sent, live row being written) the slot says whose.
      const liveOwner = (await store.liveSessionWorkspace(id)) ?? (id.startsWith('conv_') ? await slots.holder(id) : undefined);
      const record = liveOwner ? undefined : await store.getConversation(id);
      const owner = liveOwner ?? record?.workspace_id;
      if (!owner) throw conversationNotFound(id);
      if (owner !== workspaceId) throw otherWorkspace('web session');
      if (record?.erased_at) throw conversationErased(id);
      const finished = record ? { status: record.status, endReason: record.end_reason, endedAt: new Date(record.ended_at) } : null;
      const reply = await live.stream({ workspaceId, conversationId: id, ...resume, finished, credentialId: credentialOf(req.auth) });
      // The contract's body is the stream's text; Koa pipes the stream.
      return { ...reply, body: reply.body as never };
    },
  };
}
