/** Handlers of the agent test operations. Thin: the rules live in service.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { AgentTestService } from './service.js';

export function agentTestRoutes(tests: AgentTestService): Handlers {
  return {
    createAgentTest: async (req) => ({ status: 201, body: await tests.create(workspaceOf(req.auth), req.params.agent_id, req.body) }),
    listAgentTests: async (req) => ({ status: 200, body: await tests.list(workspaceOf(req.auth), req.params.agent_id, req.query) }),
    getAgentTest: async (req) => ({ status: 200, body: await tests.get(workspaceOf(req.auth), req.params.agent_id, req.params.test_id) }),
    updateAgentTest: async (req) => ({
      status: 200,
      body: await tests.update(workspaceOf(req.auth), req.params.agent_id, req.params.test_id, req.body),
    }),
    deleteAgentTest: async (req) => ({ status: 200, body: await tests.delete(workspaceOf(req.auth), req.params.agent_id, req.params.test_id) }),
  };
}
