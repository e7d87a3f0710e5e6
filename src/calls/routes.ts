/**
 * Handlers of the Calls operations, the carriers' callbacks, inbound number configuration and the
 * sandbox ringing helper (thin: the rules are in service.ts, callbacks.ts and inbound.ts).
 */
import type { AnyHandler, Handlers } from '../contract/handlers.js';
import { credentialOf, workspaceOf } from '../contract/principal.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { components } from '../../generated/openapi.js';
import type { CallService } from './service.js';
import type { Context } from 'koa';
import type { CarrierCallbacks, CarrierRequest } from './callbacks.js';
import type { InboundNumbers } from './inbound.js';
import type { Carriers } from '../carriers/index.js';
import { exemptWhileAnswering } from '../http/connection-limits.js';
import { conversationErased, resumeAfter, type LiveEvents } from '../events/index.js';
import { isTerminal } from './store.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];

/** A carrier callback as its signature covers it (koa-body keeps the raw body, `includeUnparsed`). */
function carrierRequest(ctx: Context): CarrierRequest {
  const raw = (ctx.request as { rawBody?: unknown }).rawBody;
  const callId = ctx.query.call_id;
  return {
    url: ctx.url,
    callId: typeof callId === 'string' ? callId : undefined,
    rawBody: typeof raw === 'string' ? raw : '',
    header: (name) => ctx.get(name) || undefined,
    verified: () => exemptWhileAnswering(ctx.req.socket, ctx.res),
  };
}

export function callRoutes(
  calls: CallService,
  inbound: InboundNumbers,
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
    enableInbound: async (req) => ({ status: 200, body: await inbound.enable(workspaceOf(req.auth), req.params.agent_id, req.params.provider) }),
    disableInbound: async (req) => ({ status: 200, body: await inbound.disable(workspaceOf(req.auth), req.params.agent_id, req.params.provider) }),
    createSandboxInboundCall: async (req) => ({ status: 201, body: await inbound.ringSandbox(workspaceOf(req.auth), req.body) }),
  };
}

/** Every registered carrier's HTTP callbacks, by the operationIds its plug-in declares. */
export function carrierCallbackRoutes(carriers: Carriers, callbacks: CarrierCallbacks): Handlers {
  const handlers: Record<string, AnyHandler> = {};
  for (const { provider, callbacks: plugin } of carriers.list()) {
    for (const operation of plugin.operations) {
      handlers[operation] = async (req) => {
        const reply = await callbacks.http(provider, operation, carrierRequest(req.ctx));
        return reply.status === 204 ? { status: 204, body: undefined } : reply;
      };
    }
  }
  return handlers as Handlers;
}

/** The call's live event stream (Server-Sent Events); authorised like `getCall`. */
export function callEventRoutes(calls: CallService, live: LiveEvents): Handlers {
  return {
    streamCallEvents: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      const resume = resumeAfter(req.headers['last-event-id'], req.query.last_event_id);
      const call = await calls.owned(workspaceId, req.params.call_id);
      if (call.erased_at) throw conversationErased(call.id);
      const finished = isTerminal(call.status)
        ? { status: call.status, endReason: call.end_reason, endedAt: new Date(call.ended_at ?? call.updated_at) }
        : null;
      const reply = await live.stream({ workspaceId, conversationId: call.id, ...resume, finished, credentialId: credentialOf(req.auth) });
      // The contract's body is the stream's text; Koa pipes the stream.
      return { ...reply, body: reply.body as never };
    },
  };
}
