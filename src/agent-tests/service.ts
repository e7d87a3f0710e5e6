/**
 * Agent tests: CRUD of an agent's scripted tests. A test is checked whole before anything is stored:
 * the shapes by the contract, the rules of definition.ts (422 `invalid_value`), its JSON Schemas in the
 * schema pool (422 `invalid_test_schema`), the agent's test count (422 `test_limit_reached`, counted with
 * the agent's row held so two creations at once cannot both take the last place) and the name (409
 * `test_name_taken`). Tests are not part of an agent's versions.
 */
import type { components } from '../../generated/openapi.js';
import { notFound, unprocessable } from '../errors/api-error.js';
import { newId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { AgentService } from '../agents/service.js';
import { expectations, mocks, schemasOf, turns, type TestDefinition } from './definition.js';
import { checkTestSchemas } from './schema-check.js';
import type { AgentTestRow, AgentTestStore } from './store.js';

export type AgentTest = components['schemas']['AgentTest'];
type CreateRequest = components['schemas']['AgentTestCreateRequest'];
type UpdateRequest = components['schemas']['AgentTestUpdateRequest'];

/** Most tests one agent may have. */
export const MAX_TESTS_PER_AGENT = 500;

export function agentTestNotFound(testId: string, param: string | null = 'test_id') {
  return notFound('agent_test_not_found', `The agent has no test ${testId}.`, param);
}

export function toAgentTest(row: AgentTestRow): AgentTest {
  const d = row.definition;
  return {
    object: 'agent_test',
    test_id: row.id,
    agent_id: row.agent_id,
    type: row.type,
    name: row.name,
    description: d.description,
    variables: d.variables,
    expect_first_message: d.expect_first_message,
    turns: d.turns,
    tool_mocks: d.tool_mocks,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export class AgentTestService {
  constructor(
    private readonly store: AgentTestStore,
    private readonly agents: Pick<AgentService, 'owned'>,
    private readonly opts: { maxTestsPerAgent: number } = { maxTestsPerAgent: MAX_TESTS_PER_AGENT },
  ) {}

  /** The definition a request describes, checked whole (its schemas in the pool). */
  private async definition(workspaceId: string, d: TestDefinition): Promise<TestDefinition> {
    await checkTestSchemas(workspaceId, schemasOf(d));
    return d;
  }

  async create(workspaceId: string, agentId: string, body: CreateRequest): Promise<AgentTest> {
    await this.agents.owned(workspaceId, agentId);
    const definition = await this.definition(workspaceId, {
      description: body.description ?? null,
      variables: body.variables ?? {},
      expect_first_message: expectations(body.expect_first_message, 'expect_first_message'),
      turns: turns(body.turns),
      tool_mocks: mocks(body.tool_mocks),
    });
    const row = await this.store.transaction(async (trx) => {
      await this.store.lockAgent(trx, agentId);
      const count = await this.store.count(trx, agentId);
      if (count >= this.opts.maxTestsPerAgent) {
        throw unprocessable('test_limit_reached', `An agent may have at most ${this.opts.maxTestsPerAgent} tests; delete one first.`, null);
      }
      return this.store.insert(trx, { id: newId('agentTest'), workspace_id: workspaceId, agent_id: agentId, name: body.name, type: 'scripted', definition });
    });
    return toAgentTest(row);
  }

  async list(workspaceId: string, agentId: string, params: PageParams): Promise<Page<AgentTest>> {
    await this.agents.owned(workspaceId, agentId);
    const page = await this.store.list(workspaceId, agentId, params);
    return { ...page, data: page.data.map(toAgentTest) };
  }

  private async owned(workspaceId: string, agentId: string, testId: string): Promise<AgentTestRow> {
    await this.agents.owned(workspaceId, agentId);
    const row = await this.store.find(workspaceId, agentId, testId);
    if (!row) throw agentTestNotFound(testId);
    return row;
  }

  async get(workspaceId: string, agentId: string, testId: string): Promise<AgentTest> {
    return toAgentTest(await this.owned(workspaceId, agentId, testId));
  }

  async update(workspaceId: string, agentId: string, testId: string, body: UpdateRequest): Promise<AgentTest> {
    // `type` can only restate `scripted`, the one kind (the contract holds it).
    const current = await this.owned(workspaceId, agentId, testId);
    const d = current.definition;
    const definition = await this.definition(workspaceId, {
      description: body.description !== undefined ? body.description : d.description,
      variables: body.variables ?? d.variables,
      expect_first_message: body.expect_first_message ? expectations(body.expect_first_message, 'expect_first_message') : d.expect_first_message,
      turns: body.turns ? turns(body.turns) : d.turns,
      tool_mocks: body.tool_mocks ? mocks(body.tool_mocks) : d.tool_mocks,
    });
    return toAgentTest(await this.store.update(testId, { name: body.name ?? current.name, definition }));
  }

  async delete(workspaceId: string, agentId: string, testId: string): Promise<{ status: 'deleted'; test_id: string }> {
    await this.owned(workspaceId, agentId, testId);
    await this.store.delete(workspaceId, agentId, testId);
    return { status: 'deleted', test_id: testId };
  }
}
