/**
 * HTTP tools: workspace resources attached to agents (one tool can serve many agents). Header values
 * are secrets: sealed before storage, returned only as `header_names`, opened only to make a request.
 */
import { sameOrigin } from '../net/same-origin.js';
import type { components } from '../../generated/openapi.js';
import type { SecretBox } from '../crypto/secrets.js';
import { notFound, otherWorkspace, unprocessable } from '../errors/api-error.js';
import { newId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import type { AgentService } from '../agents/service.js';
import { callHttpTool, type HttpCallOutcome } from './http-call.js';
import { checkArguments, checkParametersSchema } from './schema-check.js';
import type { ToolRow, ToolStore, ToolValues } from './store.js';

export type Tool = components['schemas']['Tool'];
type CreateRequest = components['schemas']['ToolCreateRequest'];
type UpdateRequest = components['schemas']['ToolUpdateRequest'];
type TestResult = components['schemas']['ToolTestResult'];

const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection']);
const MAX_HEADERS = 20;
/** What testTool shows of a response body (the contract's 16 KB). */
export const TEST_BODY_LIMIT = 16 * 1024;

const has = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

export function toolNotFound(toolId: string) {
  return notFound('tool_not_found', `No tool ${toolId}.`, 'tool_id');
}

/** The context a tool header's value is sealed for: that tool, that header (names are case-insensitive). */
const headerContext = (toolId: string, name: string) => `tools/${toolId}/headers/${name.toLowerCase()}`;

export class ToolService {
  constructor(
    private readonly store: ToolStore,
    private readonly agents: AgentService,
    private readonly secrets: SecretBox,
    private readonly outbound: OutboundPolicy,
  ) {}

  toTool(row: ToolRow): Tool {
    return {
      tool_id: row.id,
      name: row.name,
      description: row.description,
      parameters: row.parameters,
      url: row.url,
      method: row.method,
      header_names: Object.keys(row.headers).sort(),
      timeout_ms: row.timeout_ms,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
    };
  }

  async owned(workspaceId: string, toolId: string): Promise<ToolRow> {
    const row = await this.store.find(toolId);
    if (!row) throw toolNotFound(toolId);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('tool');
    return row;
  }

  private checkToolUrl(url: string): Promise<void> {
    return checkTargetUrl(this.outbound, url, 'url', { acceptUnresolvable: false });
  }

  /** Applies a header change (create: all strings; update: null removes) onto the stored sealed map. */
  private mergeHeaders(toolId: string, stored: Record<string, string>, input: Record<string, string | null> | null): Record<string, string> {
    if (input === null) return {};
    const out = { ...stored };
    for (const [name, value] of Object.entries(input)) {
      if (RESERVED_HEADERS.has(name.toLowerCase()))
        throw unprocessable('reserved_header', `The header '${name}' is set by the service and cannot be configured.`, `headers.${name}`);
      // Header names are case-insensitive: a new spelling replaces the stored one.
      for (const existing of Object.keys(out)) if (existing.toLowerCase() === name.toLowerCase()) delete out[existing];
      if (value !== null) out[name] = this.secrets.seal(value, headerContext(toolId, name));
    }
    if (Object.keys(out).length > MAX_HEADERS) throw unprocessable('too_many_headers', `A tool may have at most ${MAX_HEADERS} headers.`, 'headers');
    return out;
  }

  async create(workspaceId: string, body: CreateRequest): Promise<Tool> {
    const parameters = (body.parameters ?? { type: 'object', properties: {} }) as Record<string, unknown>;
    await checkParametersSchema(workspaceId, parameters);
    const id = newId('tool');
    const headers = this.mergeHeaders(id, {}, (body.headers ?? {}) as Record<string, string>);
    await this.checkToolUrl(body.url);
    const values: ToolValues = {
      name: body.name,
      description: body.description,
      parameters,
      url: body.url,
      method: body.method ?? 'POST',
      headers,
      timeout_ms: body.timeout_ms ?? 10_000,
    };
    return this.toTool(await this.store.insert({ id, workspace_id: workspaceId, ...values }));
  }

  async list(workspaceId: string, params: PageParams): Promise<Page<Tool>> {
    const page = await this.store.list(workspaceId, params);
    return { ...page, data: page.data.map((r) => this.toTool(r)) };
  }

  async get(workspaceId: string, toolId: string): Promise<Tool> {
    return this.toTool(await this.owned(workspaceId, toolId));
  }

  async update(workspaceId: string, toolId: string, body: UpdateRequest): Promise<Tool> {
    const current = await this.owned(workspaceId, toolId);
    const changes: Partial<ToolValues> = {};
    if (has(body, 'parameters') && body.parameters) {
      await checkParametersSchema(workspaceId, body.parameters as Record<string, unknown>);
      changes.parameters = body.parameters as Record<string, unknown>;
    }
    // Stored headers are bound to the tool's origin: a new scheme, host or port keeps only the headers
    // sent in the same request, so no secret goes to a destination it was not given for.
    const moved = body.url !== undefined && !sameOrigin(body.url, current.url);
    if (moved) changes.headers = this.mergeHeaders(toolId, {}, (body.headers ?? {}) as Record<string, string | null>);
    else if (has(body, 'headers')) changes.headers = this.mergeHeaders(toolId, current.headers, (body.headers ?? null) as Record<string, string | null> | null);
    if (body.url !== undefined) {
      await this.checkToolUrl(body.url);
      changes.url = body.url;
    }
    if (body.name !== undefined) changes.name = body.name;
    if (body.description !== undefined) changes.description = body.description;
    if (body.method !== undefined) changes.method = body.method;
    if (body.timeout_ms !== undefined) changes.timeout_ms = body.timeout_ms;
    if (Object.keys(changes).length === 0) return this.toTool(current);
    return this.toTool(await this.store.update(toolId, changes));
  }

  async delete(workspaceId: string, toolId: string): Promise<{ status: 'deleted'; tool_id: string }> {
    await this.owned(workspaceId, toolId);
    await this.store.delete(workspaceId, toolId);
    return { status: 'deleted', tool_id: toolId };
  }

  /** Sends one request with the tool's stored settings; the outcome, failing or not, is data. */
  invoke(row: ToolRow, args: Record<string, unknown>, opts: { timeoutMs?: number; maxBodyBytes: number }): Promise<HttpCallOutcome> {
    const headers = Object.fromEntries(Object.entries(row.headers).map(([k, v]) => [k, this.secrets.open(v, headerContext(row.id, k))]));
    const timeoutMs = Math.min(row.timeout_ms, opts.timeoutMs ?? row.timeout_ms);
    return callHttpTool(this.outbound, { url: row.url, method: row.method, headers, args, timeoutMs, maxBodyBytes: opts.maxBodyBytes });
  }

  async test(workspaceId: string, toolId: string, args: Record<string, unknown>): Promise<TestResult> {
    const row = await this.owned(workspaceId, toolId);
    await checkArguments(workspaceId, row.parameters, args);
    const o = await this.invoke(row, args, { maxBodyBytes: TEST_BODY_LIMIT });
    return { ok: o.ok, status_code: o.statusCode, duration_ms: o.durationMs, response_body: o.body, response_truncated: o.truncated, error: o.error };
  }

  async listForAgent(workspaceId: string, agentId: string, params: PageParams): Promise<Page<Tool>> {
    await this.agents.owned(workspaceId, agentId);
    const page = await this.store.listForAgent(agentId, params);
    return { ...page, data: page.data.map((r) => this.toTool(r)) };
  }

  /** The workspace's tools a version links, with their sealed headers, for the runner (deleted ones are skipped). */
  rowsByIds(workspaceId: string, ids: readonly string[]): Promise<ToolRow[]> {
    return this.store.byIds(workspaceId, ids);
  }

  /** Links the tool to the agent's draft: a write to the agent (the next version, `If-Match`); answers the agent's ETag too. */
  async attach(workspaceId: string, agentId: string, toolId: string, ifMatch?: string): Promise<{ tool: Tool; etag: string }> {
    await this.agents.owned(workspaceId, agentId);
    const tool = await this.owned(workspaceId, toolId);
    const etag = await this.agents.changeLinks(workspaceId, agentId, ifMatch, (trx) => this.store.attach(trx, workspaceId, agentId, toolId));
    return { tool: this.toTool(tool), etag };
  }

  async detach(
    workspaceId: string,
    agentId: string,
    toolId: string,
    ifMatch?: string,
  ): Promise<{ result: { status: 'detached'; tool_id: string }; etag: string }> {
    await this.agents.owned(workspaceId, agentId);
    await this.owned(workspaceId, toolId);
    const etag = await this.agents.changeLinks(workspaceId, agentId, ifMatch, (trx) => this.store.detach(trx, agentId, toolId));
    return { result: { status: 'detached', tool_id: toolId }, etag };
  }
}
