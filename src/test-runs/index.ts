/** Assembly of test runs: the store, the service, the case driver, the runner and its job, the API's handlers. */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { AgentService } from '../agents/service.js';
import type { AgentTestStore } from '../agent-tests/store.js';
import type { Handlers } from '../contract/handlers.js';
import type { ToolRunner } from '../conversation/tool-runner.js';
import type { JobQueue } from '../jobs/queue.js';
import type { KnowledgeService } from '../knowledge/service.js';
import type { Clock } from '../lib/clock.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import type { VoiceService } from '../voice/types.js';
import type { TestRunCompletedPublisher } from '../webhooks/events.js';
import { CaseDriver } from './driver.js';
import { testRunRoutes } from './routes.js';
import { TestRunRunner } from './runner.js';
import { TestRunService } from './service.js';
import { TestRunStore } from './store.js';

export interface TestRuns {
  service: TestRunService;
  runner: TestRunRunner;
  routes: Handlers;
}

export interface TestRunDeps {
  config: Pick<
    Config,
    'TEST_RUNS_ACTIVE_PER_WORKSPACE' | 'TEST_RUNS_INSTANCE_CONCURRENCY' | 'TEST_TURN_TIMEOUT_MS' | 'TEST_CASE_TIMEOUT_MS' | 'CONVERSATION_RECORD_MAX_BYTES'
  >;
  knex: Knex;
  clock: Clock;
  log: Logger;
  agents: AgentService;
  tests: AgentTestStore;
  voice: VoiceService;
  tools: Pick<ToolRunner, 'catalogue'>;
  knowledge: Pick<KnowledgeService, 'searchIn'>;
  events: TestRunCompletedPublisher;
  jobs: JobQueue;
  outbound: OutboundPolicy;
}

export function createTestRuns(deps: TestRunDeps): TestRuns {
  const { config } = deps;
  const log = deps.log.child({ component: 'test-runs' });
  const store = new TestRunStore(deps.knex);
  const service = new TestRunService(store, deps.tests, deps.agents, deps.jobs, deps.outbound, { activePerWorkspace: config.TEST_RUNS_ACTIVE_PER_WORKSPACE });
  const driver = new CaseDriver(
    { agents: deps.agents, voice: deps.voice, tools: deps.tools, knowledge: deps.knowledge, clock: deps.clock, log },
    { turnTimeoutMs: config.TEST_TURN_TIMEOUT_MS, caseTimeoutMs: config.TEST_CASE_TIMEOUT_MS, recordMaxBytes: config.CONVERSATION_RECORD_MAX_BYTES },
  );
  const runner = new TestRunRunner(store, driver, deps.events, log, { instanceConcurrency: config.TEST_RUNS_INSTANCE_CONCURRENCY });
  runner.register(deps.jobs);
  return { service, runner, routes: testRunRoutes(service) };
}
