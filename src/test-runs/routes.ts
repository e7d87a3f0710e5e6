/** Handlers of the test run operations. Thin: the rules live in service.ts. */
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import type { TestRunService } from './service.js';

export function testRunRoutes(runs: TestRunService): Handlers {
  return {
    createTestRun: async (req) => ({ status: 201, body: await runs.create(workspaceOf(req.auth), req.body) }),
    listTestRuns: async (req) => ({ status: 200, body: await runs.list(workspaceOf(req.auth), req.query) }),
    getTestRun: async (req) => ({ status: 200, body: await runs.get(workspaceOf(req.auth), req.params.run_id) }),
    listTestRunCases: async (req) => ({ status: 200, body: await runs.listCases(workspaceOf(req.auth), req.params.run_id, req.query) }),
  };
}
