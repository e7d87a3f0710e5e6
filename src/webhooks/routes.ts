/** Handlers of the Webhooks operations. Thin: the rules live in service.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { WebhookService } from './service.js';

export function webhookRoutes(service: WebhookService): Handlers {
  return {
    createWebhook: async (req) => {
      const { webhook, created } = await service.register(workspaceOf(req.auth), req.body);
      return created ? { status: 201, body: webhook } : { status: 200, body: webhook };
    },
    listWebhooks: async (req) => ({ status: 200, body: await service.list(workspaceOf(req.auth), req.query) }),
    updateWebhook: async (req) => ({ status: 200, body: await service.updateEvents(workspaceOf(req.auth), req.params.webhook_id, req.body.events) }),
    deleteWebhook: async (req) => ({ status: 200, body: await service.remove(workspaceOf(req.auth), req.params.webhook_id) }),
    getWebhookSecret: async (req) => ({ status: 200, body: await service.secret(workspaceOf(req.auth)) }),
    rotateWebhookSecret: async (req) => ({ status: 200, body: await service.rotate(workspaceOf(req.auth)) }),
    listWebhookDeliveries: async (req) => ({ status: 200, body: await service.deliveries(workspaceOf(req.auth), req.params.webhook_id, req.query) }),
  };
}
