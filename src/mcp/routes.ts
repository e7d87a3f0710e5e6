/**
 * Handlers of the MCP Servers operations. Thin: the rules live in service.ts. connectMcpServer's body
 * was validated as McpServerCreateRequest's variants made one object (`x-validate-as: one-object`):
 * `auth_type` may be absent (taken as `none`), and its rules are the service's.
 */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { McpServerCreateInput, McpService } from './service.js';

export function mcpRoutes(mcp: McpService): Handlers {
  return {
    connectMcpServer: async (req) => ({ status: 201, body: await mcp.connect(workspaceOf(req.auth), req.body as McpServerCreateInput) }),
    listMcpServers: async (req) => ({ status: 200, body: await mcp.list(workspaceOf(req.auth), req.query) }),
    getMcpServer: async (req) => ({ status: 200, body: await mcp.get(workspaceOf(req.auth), req.params.mcp_server_id) }),
    updateMcpServer: async (req) => ({ status: 200, body: await mcp.update(workspaceOf(req.auth), req.params.mcp_server_id, req.body) }),
    deleteMcpServer: async (req) => ({ status: 200, body: await mcp.delete(workspaceOf(req.auth), req.params.mcp_server_id) }),
    refreshMcpServerTools: async (req) => ({ status: 200, body: await mcp.refresh(workspaceOf(req.auth), req.params.mcp_server_id) }),
    authorizeMcpServer: async (req) => ({ status: 200, body: await mcp.authorize(workspaceOf(req.auth), req.params.mcp_server_id) }),
    mcpOAuthCallback: async (req) => ({ status: 200, body: await mcp.completeAuthorization(req.query), type: 'text/html' }),
    listAgentMcpServers: async (req) => ({ status: 200, body: await mcp.listForAgent(workspaceOf(req.auth), req.params.agent_id, req.query) }),
    attachMcpServer: async (req) => {
      const { server, etag } = await mcp.attach(workspaceOf(req.auth), req.params.agent_id, req.params.mcp_server_id, req.headers['if-match']);
      return { status: 200, body: server, headers: { ETag: etag } };
    },
    detachMcpServer: async (req) => {
      const { result, etag } = await mcp.detach(workspaceOf(req.auth), req.params.agent_id, req.params.mcp_server_id, req.headers['if-match']);
      return { status: 200, body: result, headers: { ETag: etag } };
    },
  };
}
