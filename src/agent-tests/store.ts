/** `agent_tests`: an agent's scripted tests. */
import type { Knex } from 'knex';
import { conflict } from '../errors/api-error.js';
import { isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type PageParams } from '../lib/pagination.js';
import type { TestDefinition } from './definition.js';

export interface AgentTestRow {
  id: string;
  workspace_id: string;
  agent_id: string;
  name: string;
  type: 'scripted';
  definition: TestDefinition;
  created_at: Date;
  updated_at: Date;
}

const nameTaken = (name: string) => conflict('test_name_taken', `The agent already has a test named '${name}'.`, 'name');

export class AgentTestStore {
  constructor(private readonly db: Knex) {}

  transaction<T>(work: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(work);
  }

  /** Holds the agent's row until the transaction ends, so two creations at once count each other's test. */
  async lockAgent(trx: Knex.Transaction, agentId: string): Promise<void> {
    await trx('agents').where({ id: agentId }).forUpdate().first('id');
  }

  async count(trx: Knex.Transaction, agentId: string): Promise<number> {
    const row = await trx('agent_tests').where({ agent_id: agentId }).count<{ count: string }[]>('* as count');
    return Number(row[0].count);
  }

  async insert(trx: Knex.Transaction, row: Omit<AgentTestRow, 'created_at' | 'updated_at'>): Promise<AgentTestRow> {
    try {
      const [created] = await trx('agent_tests')
        .insert({ ...row, definition: JSON.stringify(row.definition) })
        .returning('*');
      return created;
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(row.name);
      throw err;
    }
  }

  find(workspaceId: string, agentId: string, id: string): Promise<AgentTestRow | undefined> {
    return this.db('agent_tests').where({ id, agent_id: agentId, workspace_id: workspaceId }).first();
  }

  async update(id: string, values: { name: string; definition: TestDefinition }): Promise<AgentTestRow> {
    try {
      const [row] = await this.db('agent_tests')
        .where({ id })
        .update({ name: values.name, definition: JSON.stringify(values.definition), updated_at: this.db.fn.now() })
        .returning('*');
      return row;
    } catch (err) {
      if (isUniqueViolation(err)) throw nameTaken(values.name);
      throw err;
    }
  }

  async delete(workspaceId: string, agentId: string, id: string): Promise<void> {
    await this.db('agent_tests').where({ id, agent_id: agentId, workspace_id: workspaceId }).delete();
  }

  list(workspaceId: string, agentId: string, params: PageParams) {
    return paginate<AgentTestRow, AgentTestRow>(this.db('agent_tests').where({ agent_id: agentId, workspace_id: workspaceId }).select('*'), params, (r) => r);
  }

  /** The agent's tests in creation order, or those of `ids` (in any order), for a run. */
  forRun(workspaceId: string, agentId: string, ids?: string[]): Promise<AgentTestRow[]> {
    const q = this.db('agent_tests').where({ agent_id: agentId, workspace_id: workspaceId });
    if (ids) q.whereIn('id', ids);
    return q.orderBy('id', 'asc').select('*');
  }
}
