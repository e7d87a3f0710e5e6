/** HTTP tools and their attachment to agents. Header values arrive sealed. */
import type { Knex } from 'knex';
import { conflict, notFound } from '../errors/api-error.js';
import { isForeignKeyViolation, isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type PageParams } from '../lib/pagination.js';
import { refuseOverLimit } from '../agents/link-limit.js';

export interface ToolRow {
  id: string;
  workspace_id: string;
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  url: string;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Header name -> sealed value. */
  headers: Record<string, string>;
  timeout_ms: number;
  created_at: Date;
  updated_at: Date;
}

/** Most tools an agent's draft links (every version copies its links; the voice service is declared each one). */
export const MAX_AGENT_TOOLS = 128;

export type ToolValues = Omit<ToolRow, 'id' | 'workspace_id' | 'created_at' | 'updated_at'>;

const nameTaken = (name: string) => conflict('tool_name_taken', `A tool named '${name}' already exists in this workspace.`, 'name');

function encode(values: Partial<ToolValues>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...values };
  if (values.parameters) out.parameters = JSON.stringify(values.parameters);
  if (values.headers) out.headers = JSON.stringify(values.headers);
  return out;
}

export class ToolStore {
  constructor(private readonly db: Knex) {}

  async insert(row: { id: string; workspace_id: string } & ToolValues): Promise<ToolRow> {
    try {
      const [created] = await this.db('tools').insert(encode(row)).returning('*');
      return created;
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(row.name);
      throw err;
    }
  }

  find(id: string): Promise<ToolRow | undefined> {
    return this.db('tools').where({ id }).first();
  }

  async update(id: string, values: Partial<ToolValues>): Promise<ToolRow> {
    try {
      const [row] = await this.db('tools')
        .where({ id })
        .update({ ...encode(values), updated_at: this.db.fn.now() })
        .returning('*');
      return row;
    } catch (err) {
      if (isUniqueViolation(err) && values.name) throw nameTaken(values.name);
      throw err;
    }
  }

  async delete(workspaceId: string, id: string): Promise<void> {
    await this.db('tools').where({ id, workspace_id: workspaceId }).delete();
  }

  list(workspaceId: string, params: PageParams) {
    return paginate<ToolRow, ToolRow>(this.db('tools').where({ workspace_id: workspaceId }).select('*'), params, (r) => r);
  }

  listForAgent(agentId: string, params: PageParams) {
    const q = this.db('tools as t').join('agent_tools as at', 'at.tool_id', 't.id').where('at.agent_id', agentId).select('t.*');
    return paginate<ToolRow, ToolRow>(q, params, (r) => r, 't.id');
  }

  /** The workspace's tools among `ids` (a version's links; ids of tools deleted since find nothing), by id. */
  byIds(workspaceId: string, ids: readonly string[]): Promise<ToolRow[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.db('tools')
      .where({ workspace_id: workspaceId })
      .whereIn('id', [...ids])
      .orderBy('id')
      .select('*');
  }

  /** Links the tool to the agent's draft; false when it was linked already. */
  async attach(trx: Knex, workspaceId: string, agentId: string, toolId: string): Promise<boolean> {
    try {
      const inserted = await trx('agent_tools')
        .insert({ workspace_id: workspaceId, agent_id: agentId, tool_id: toolId })
        .onConflict(['agent_id', 'tool_id'])
        .ignore()
        .returning('tool_id');
      if (inserted.length > 0) await refuseOverLimit(trx, 'agent_tools', agentId, MAX_AGENT_TOOLS, 'tools', 'tool_id');
      return inserted.length > 0;
    } catch (err) {
      // Deleted since the caller found it.
      if (isForeignKeyViolation(err)) throw notFound('tool_not_found', `No tool ${toolId}.`, 'tool_id');
      throw err;
    }
  }

  /** Unlinks the tool from the agent's draft; false when it was not linked. */
  async detach(trx: Knex, agentId: string, toolId: string): Promise<boolean> {
    return (await trx('agent_tools').where({ agent_id: agentId, tool_id: toolId }).delete()) > 0;
  }
}
