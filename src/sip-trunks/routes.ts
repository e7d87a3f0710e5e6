/** Handlers of the SIP Trunks operations. Thin: the rules live in service.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { SipTrunkService } from './service.js';

export function sipTrunkRoutes(trunks: SipTrunkService): Handlers {
  return {
    createSipTrunk: async (req) => ({ status: 201, body: await trunks.create(workspaceOf(req.auth), req.body) }),
    listSipTrunks: async (req) => ({ status: 200, body: await trunks.list(workspaceOf(req.auth), req.query) }),
    getSipTrunk: async (req) => ({ status: 200, body: await trunks.get(workspaceOf(req.auth), req.params.trunk_id) }),
    updateSipTrunk: async (req) => ({ status: 200, body: await trunks.update(workspaceOf(req.auth), req.params.trunk_id, req.body) }),
    deleteSipTrunk: async (req) => ({ status: 200, body: await trunks.delete(workspaceOf(req.auth), req.params.trunk_id) }),
  };
}
