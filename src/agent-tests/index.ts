/** Assembly of agent tests: the store, the service and the API's handlers. */
import type { Knex } from 'knex';
import type { AgentService } from '../agents/service.js';
import type { Handlers } from '../contract/handlers.js';
import { agentTestRoutes } from './routes.js';
import { AgentTestService, MAX_TESTS_PER_AGENT } from './service.js';
import { AgentTestStore } from './store.js';

export interface AgentTests {
  store: AgentTestStore;
  service: AgentTestService;
  routes: Handlers;
}

export function createAgentTests(knex: Knex, agents: AgentService, opts: { maxTestsPerAgent?: number } = {}): AgentTests {
  const store = new AgentTestStore(knex);
  const service = new AgentTestService(store, agents, { maxTestsPerAgent: opts.maxTestsPerAgent ?? MAX_TESTS_PER_AGENT });
  return { store, service, routes: agentTestRoutes(service) };
}
