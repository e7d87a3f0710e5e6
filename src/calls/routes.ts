/** Handlers of the Calls operations (thin: the rules are in service.ts). */
import type { Handlers } from '../http/handler-types.js';
import { workspaceOf } from '../workspaces/principal.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { components } from '../../generated/openapi.js';
import type { CallService } from './service.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];

export function callRoutes(
  calls: CallService,
  deliveries: (workspaceId: string, callId: string, params: PageParams) => Promise<Page<WebhookDelivery>>,
): Handlers {
  return {
    createCall: async (req) => ({ status: 201, body: await calls.create(workspaceOf(req.auth), req.body) }),
    listCalls: async (req) => ({ status: 200, body: await calls.list(workspaceOf(req.auth), req.query) }),
    getCall: async (req) => ({ status: 200, body: await calls.get(workspaceOf(req.auth), req.params.call_id) }),
    hangupCall: async (req) => ({ status: 200, body: await calls.hangup(workspaceOf(req.auth), req.params.call_id) }),
    listCallWebhookDeliveries: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      await calls.owned(workspaceId, req.params.call_id);
      return { status: 200, body: await deliveries(workspaceId, req.params.call_id, req.query) };
    },
  };
}
