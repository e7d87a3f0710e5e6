/** Handlers of the Auth, Members, API Keys and Operator operations. Thin: the rules live in service.ts. */
import type { Handlers, HandlerRequest, OperationId } from '../contract/handlers.js';
import type { Principal } from '../contract/principal.js';
import type { WorkspaceService } from './service.js';
import type { AuthRateLimit } from './auth-rate-limit.js';

type Dashboard = Extract<Principal, { kind: 'dashboard' }>;

function dashboard<O extends OperationId>(req: HandlerRequest<O>): Dashboard {
  if (req.auth.kind !== 'dashboard') throw new Error(`${req.operationId} reached without a dashboard session`);
  return req.auth;
}

export function workspaceRoutes(service: WorkspaceService, authLimit: AuthRateLimit): Handlers {
  return {
    signup: async (req) => {
      await authLimit.consume(req.ctx.req);
      return { status: 201, body: await service.signup(req.body) };
    },
    login: async (req) => {
      await authLimit.consume(req.ctx.req);
      return { status: 200, body: await service.login(req.body) };
    },
    logout: async (req) => {
      await service.logout(dashboard(req).sessionId);
      return { status: 204, body: undefined };
    },
    getCurrentSession: async (req) => ({ status: 200, body: await service.currentSession(dashboard(req)) }),
    listMembers: async (req) => ({ status: 200, body: await service.listMembers(dashboard(req).workspaceId) }),
    createMember: async (req) => ({ status: 201, body: await service.createMember(dashboard(req), req.body) }),
    createApiKey: async (req) => ({ status: 201, body: await service.createApiKey(dashboard(req), req.body.name) }),
    listApiKeys: async (req) => ({ status: 200, body: await service.listApiKeys(dashboard(req).workspaceId) }),
    revokeApiKey: async (req) => ({ status: 200, body: await service.revokeApiKey(dashboard(req), req.params.key_id) }),
    listWorkspaces: async (req) => ({ status: 200, body: await service.listWorkspaces(req.query) }),
    getWorkspace: async (req) => ({ status: 200, body: await service.getWorkspace(req.params.workspace_id) }),
    updateWorkspace: async (req) => ({ status: 200, body: await service.updateWorkspace(req.params.workspace_id, req.body) }),
  };
}
