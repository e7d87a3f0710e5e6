/** Handlers of the destination policy operations (developer read, operator read and change). Thin: the rules live in service.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { DestinationService } from './service.js';

export function destinationRoutes(service: DestinationService): Handlers {
  return {
    getDestinationPolicy: async (req) => ({ status: 200, body: await service.read(workspaceOf(req.auth)) }),
    getWorkspaceDestinationPolicy: async (req) => ({ status: 200, body: await service.readForOperator(req.params.workspace_id) }),
    updateWorkspaceDestinationPolicy: async (req) => ({ status: 200, body: await service.update(req.params.workspace_id, req.body) }),
  };
}
