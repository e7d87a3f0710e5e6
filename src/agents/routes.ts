/**
 * Handlers of the Agents operations (enableInbound/disableInbound land with telephony) and of the
 * agent's public profile (no credentials; CORS open on /api/v1/public/, src/http/cors.ts). Thin: the
 * rules live in service.ts.
 */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { AgentService } from './service.js';

export function agentRoutes(agents: AgentService): Handlers {
  return {
    createAgent: async (req) => ({ status: 201, body: await agents.create(workspaceOf(req.auth), req.body) }),
    listAgents: async (req) => ({ status: 200, body: await agents.list(workspaceOf(req.auth), req.query) }),
    getAgent: async (req) => ({ status: 200, body: await agents.get(workspaceOf(req.auth), req.params.agent_id) }),
    updateAgent: async (req) => ({ status: 200, body: await agents.update(workspaceOf(req.auth), req.params.agent_id, req.body) }),
    deleteAgent: async (req) => ({ status: 200, body: await agents.delete(workspaceOf(req.auth), req.params.agent_id) }),
    getPublicAgentProfile: async (req) => ({
      status: 200,
      body: await agents.publicProfile(req.params.agent_id),
      headers: { 'Cache-Control': 'public, max-age=60', 'Access-Control-Allow-Origin': '*' },
    }),
  };
}
