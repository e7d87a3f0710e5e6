/**
 * The tools an agent can call mid-call or mid-session, and calling them. What is offered is what the
 * version the conversation runs links (`RuntimeAgent.links`), never the draft's link tables, so a
 * detach on the draft reaches conversations only once it is published; a tool or MCP server deleted
 * since is skipped. Three sources:
 * - `http`: the HTTP tools the version links, under their own names;
 * - `mcp`: the tools of the version's usable MCP servers, named `<server>__<tool>` (the server
 *   name reduced to `[A-Za-z0-9_-]`, the whole name cut to 64 characters, the function-name limit of
 *   the voice service);
 * - `knowledge`: the built-in `search_knowledge`, offered when the version links at least one
 *   document, and searching only those.
 * On a name clash the built-in wins, then HTTP tools, then MCP tools. `call` never throws: a failing
 * tool is an outcome with `ok: false` and an error the model can read. The model's arguments to an
 * HTTP tool are validated against the tool's `parameters` in the schema pool (off the loop, bounded
 * like a tool test's) before any request: arguments that do not match are such an outcome, saying
 * what is wrong, and the tool is not called.
 */
import type { ToolCallRecord } from '../../generated/asyncapi-types.js';
import type { ToolDeclaration } from '../voice/types.js';
import { ApiError } from '../errors/api-error.js';
import type { RuntimeLinks } from '../agents/service.js';
import type { KnowledgeService } from '../knowledge/service.js';
import type { McpService } from '../mcp/service.js';
import type { ToolService } from '../tools/service.js';
import type { ToolRow } from '../tools/store.js';
import { checkArguments } from '../tools/schema-check.js';

export const SEARCH_KNOWLEDGE = 'search_knowledge';
/** Most bytes of an HTTP tool's response passed to the model. */
export const RUNTIME_BODY_LIMIT = 16 * 1024;

export type ToolSource = ToolCallRecord['source'];

/** How one tool call went: the record's fields, with the tool's whole result and the unrounded duration. */
export type ToolCallOutcome = Pick<ToolCallRecord, 'ok' | 'error' | 'source'> & { result: unknown; durationMs: number };

/** What the runner needs of the MCP service. */
export type McpToolSource = Pick<McpService, 'toolsForServers' | 'callTool'>;

/** Whose tools: the conversation's workspace and agent, and what the version it runs links. */
export interface ToolScope {
  workspaceId: string;
  agentId: string;
  links: RuntimeLinks;
}

const SEARCH_DECLARATION: ToolDeclaration = {
  name: SEARCH_KNOWLEDGE,
  description:
    "Searches the agent's knowledge base (its attached documents) and returns the most relevant passages. Use it to answer questions from the documents.",
  parameters: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'What to look for, in a few words.' },
      limit: { type: 'integer', minimum: 1, maximum: 20, description: 'Most passages to return (default 5).' },
    },
    required: ['query'],
  },
};

export function mcpToolName(serverName: string, toolName: string): string {
  const server = serverName.replace(/[^A-Za-z0-9_-]+/g, '_').replace(/^_+|_+$/g, '') || 'mcp';
  return `${server}__${toolName}`.slice(0, 64);
}

interface Resolved {
  declaration: ToolDeclaration;
  source: ToolSource;
  http?: ToolRow;
  mcp?: { mcpServerId: string; toolName: string };
}

export class ToolRunner {
  constructor(
    private readonly tools: ToolService,
    private readonly knowledge: KnowledgeService,
    private readonly mcp: McpToolSource | null = null,
    private readonly opts: { defaultTimeoutMs: number } = { defaultTimeoutMs: 10_000 },
  ) {}

  private async resolve({ workspaceId, links }: ToolScope): Promise<Map<string, Resolved>> {
    const [rows, mcpTools] = await Promise.all([
      this.tools.rowsByIds(workspaceId, links.toolIds),
      this.mcp ? this.mcp.toolsForServers(workspaceId, links.mcpServerIds).catch(() => []) : Promise.resolve([]),
    ]);
    const byName = new Map<string, Resolved>();
    if (links.documentIds.length > 0) byName.set(SEARCH_KNOWLEDGE, { declaration: SEARCH_DECLARATION, source: 'knowledge' });
    for (const row of rows) {
      if (row.workspace_id !== workspaceId || byName.has(row.name)) continue;
      byName.set(row.name, { declaration: { name: row.name, description: row.description, parameters: row.parameters }, source: 'http', http: row });
    }
    for (const t of mcpTools) {
      const name = mcpToolName(t.serverName, t.name);
      if (byName.has(name)) continue;
      const parameters = t.inputSchema && typeof t.inputSchema === 'object' ? t.inputSchema : { type: 'object', properties: {} };
      byName.set(name, {
        declaration: { name, description: t.description ?? '', parameters },
        source: 'mcp',
        mcp: { mcpServerId: t.mcpServerId, toolName: t.name },
      });
    }
    return byName;
  }

  /**
   * Every tool the scope's version offers now with where it comes from, from the database alone (tool
   * rows, stored MCP tool lists, whether documents exist): what a test run declares and mocks.
   */
  async catalogue(scope: ToolScope): Promise<Array<{ declaration: ToolDeclaration; source: ToolSource }>> {
    return [...(await this.resolve(scope)).values()].map((r) => ({ declaration: r.declaration, source: r.source }));
  }

  /** Every tool the scope's version offers now, as declared to the voice service. */
  async declarations(scope: ToolScope): Promise<ToolDeclaration[]> {
    return [...(await this.resolve(scope)).values()].map((r) => r.declaration);
  }

  async call(scope: ToolScope, name: string, args: Record<string, unknown>, opts: { timeoutMs?: number } = {}): Promise<ToolCallOutcome> {
    const { workspaceId, agentId } = scope;
    const started = performance.now();
    const elapsed = () => Math.max(0, Math.round(performance.now() - started));
    const failed = (source: ToolSource, error: string, result: unknown = null): ToolCallOutcome => ({
      ok: false,
      result,
      error,
      durationMs: elapsed(),
      source,
    });
    const safeArgs = args && typeof args === 'object' && !Array.isArray(args) ? args : {};
    let source: ToolSource = 'builtin';
    try {
      const tool = (await this.resolve(scope)).get(name);
      if (!tool) return failed('builtin', `No tool named '${name}' is available to this agent.`);
      source = tool.source;
      const timeoutMs = opts.timeoutMs ?? this.opts.defaultTimeoutMs;
      if (tool.source === 'knowledge') {
        const query = typeof safeArgs.query === 'string' ? safeArgs.query : '';
        const limit = typeof safeArgs.limit === 'number' ? safeArgs.limit : 5;
        const hits = await this.knowledge.searchIn(workspaceId, agentId, scope.links.documentIds, query, limit);
        return {
          ok: true,
          result: { passages: hits.map((h) => ({ document: h.name, text: h.text, score: h.score })) },
          error: null,
          durationMs: elapsed(),
          source,
        };
      }
      if (tool.http) {
        await checkArguments(workspaceId, tool.http.parameters, safeArgs);
        const o = await this.tools.invoke(tool.http, safeArgs, { timeoutMs, maxBodyBytes: RUNTIME_BODY_LIMIT });
        return { ok: o.ok, result: o.body, error: o.error ? o.error.message : null, durationMs: elapsed(), source };
      }
      if (tool.mcp && this.mcp) {
        const o = await this.mcp.callTool(workspaceId, tool.mcp.mcpServerId, tool.mcp.toolName, safeArgs, { timeoutMs });
        return { ok: o.ok, result: o.result ?? null, error: o.ok ? null : (o.error ?? 'The MCP tool failed.'), durationMs: elapsed(), source };
      }
      return failed(source, `The tool '${name}' cannot be called.`);
    } catch (err) {
      // ApiError messages are written for clients (no secrets); anything else stays generic.
      return failed(source, err instanceof ApiError ? err.message : `The tool '${name}' failed unexpectedly.`);
    }
  }
}
