/** Handlers of the Usage operations (usage by day and agent, limits and their use). Thin: the rules live in usage.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { UsageService } from './usage.js';

export function usageRoutes(service: UsageService): Handlers {
  return {
    getUsage: async (req) => ({ status: 200, body: await service.usage(workspaceOf(req.auth), req.query) }),
    getLimits: async (req) => ({ status: 200, body: await service.limits(workspaceOf(req.auth)) }),
  };
}
