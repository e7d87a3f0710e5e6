/**
 * Handlers of the Agents operations (enableInbound/disableInbound land with telephony), the voice
 * catalogue agents choose from, and the agent's public profile (no credentials; CORS open on /api/v1/public/, src/http/cors.ts). Thin: the
 * rules live in service.ts.
 */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import { agentETag } from './etag.js';
import type { Agent, AgentService } from './service.js';

/** The agent as an answer, with its `ETag` for later conditional writes. */
const withTag = <S extends 200 | 201>(status: S, body: Agent) => ({ status, body, headers: { ETag: agentETag(body as Required<Agent>) } });

export function agentRoutes(agents: AgentService): Handlers {
  return {
    createAgent: async (req) => withTag(201, await agents.create(workspaceOf(req.auth), req.body)),
    listAgents: async (req) => ({ status: 200, body: await agents.list(workspaceOf(req.auth), req.query) }),
    getAgent: async (req) => withTag(200, await agents.get(workspaceOf(req.auth), req.params.agent_id)),
    updateAgent: async (req) => withTag(200, await agents.update(workspaceOf(req.auth), req.params.agent_id, req.body, req.headers['if-match'])),
    getVoiceCatalogue: async () => ({ status: 200, body: agents.voiceCatalogue() }),
    deleteAgent: async (req) => ({ status: 200, body: await agents.delete(workspaceOf(req.auth), req.params.agent_id, req.headers['if-match']) }),
    listAgentVersions: async (req) => ({ status: 200, body: await agents.listVersions(workspaceOf(req.auth), req.params.agent_id, req.query) }),
    getAgentVersion: async (req) => ({ status: 200, body: await agents.getVersion(workspaceOf(req.auth), req.params.agent_id, Number(req.params.version)) }),
    publishAgent: async (req) => withTag(200, await agents.publish(workspaceOf(req.auth), req.params.agent_id, req.body?.version, req.headers['if-match'])),
    restoreAgentVersion: async (req) =>
      withTag(200, await agents.restore(workspaceOf(req.auth), req.params.agent_id, Number(req.params.version), req.headers['if-match'])),
    getPublicAgentProfile: async (req) => ({
      status: 200,
      body: await agents.publicProfile(req.params.agent_id),
      headers: { 'Cache-Control': 'public, max-age=60', 'Access-Control-Allow-Origin': '*' },
    }),
  };
}
