/** Handlers of the Tools operations. Thin: the rules live in service.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { ToolService } from './service.js';

export function toolRoutes(tools: ToolService): Handlers {
  return {
    createTool: async (req) => ({ status: 201, body: await tools.create(workspaceOf(req.auth), req.body) }),
    listTools: async (req) => ({ status: 200, body: await tools.list(workspaceOf(req.auth), req.query) }),
    getTool: async (req) => ({ status: 200, body: await tools.get(workspaceOf(req.auth), req.params.tool_id) }),
    updateTool: async (req) => ({ status: 200, body: await tools.update(workspaceOf(req.auth), req.params.tool_id, req.body) }),
    deleteTool: async (req) => ({ status: 200, body: await tools.delete(workspaceOf(req.auth), req.params.tool_id) }),
    testTool: async (req) => ({
      status: 200,
      body: await tools.test(workspaceOf(req.auth), req.params.tool_id, (req.body.arguments ?? {}) as Record<string, unknown>),
    }),
    listAgentTools: async (req) => ({ status: 200, body: await tools.listForAgent(workspaceOf(req.auth), req.params.agent_id, req.query) }),
    attachTool: async (req) => {
      const { tool, etag } = await tools.attach(workspaceOf(req.auth), req.params.agent_id, req.params.tool_id, req.headers['if-match']);
      return { status: 200, body: tool, headers: { ETag: etag } };
    },
    detachTool: async (req) => {
      const { result, etag } = await tools.detach(workspaceOf(req.auth), req.params.agent_id, req.params.tool_id, req.headers['if-match']);
      return { status: 200, body: result, headers: { ETag: etag } };
    },
  };
}
