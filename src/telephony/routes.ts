/** Handlers of the carrier callbacks, inbound number configuration and the sandbox ringing helper. */
import type { Handlers } from '../http/handler-types.js';
import { workspaceOf } from '../workspaces/principal.js';
import type { CarrierCallbacks } from './callbacks.js';
import type { InboundNumbers } from './inbound.js';

export function telephonyRoutes(callbacks: CarrierCallbacks, inbound: InboundNumbers): Handlers {
  return {
    providerAVoiceWebhook: async (req) => ({ status: 200, body: await callbacks.providerAVoice(req.ctx), type: 'text/xml' }),
    providerAStatusCallback: async (req) => {
      await callbacks.providerAStatus(req.ctx);
      return { status: 204, body: undefined };
    },
    providerAAmdCallback: async (req) => {
      await callbacks.providerAAmd(req.ctx);
      return { status: 204, body: undefined };
    },
    providerBEvent: async (req) => {
      await callbacks.providerBEvent(req.ctx, req.body as never);
      return { status: 204, body: undefined };
    },
    enableInbound: async (req) => ({ status: 200, body: await inbound.enable(workspaceOf(req.auth), req.params.agent_id, req.params.provider) }),
    disableInbound: async (req) => ({ status: 200, body: await inbound.disable(workspaceOf(req.auth), req.params.agent_id, req.params.provider) }),
    createSandboxInboundCall: async (req) => ({ status: 201, body: await inbound.ringSandbox(workspaceOf(req.auth), req.body) }),
  };
}
