/** The job that runs a test run's cases (runner.ts), added with the run. */
import { idPayload, jobKind, PRIORITY } from '../jobs/queue.js';

export const TEST_RUN_EXECUTE = jobKind<{ run_id: string }>({
  name: 'test_run_execute',
  parse: idPayload('run_id'),
  key: (p) => `test_run_execute:${p.run_id}`,
  // Behind a call's own work and with batch bookkeeping: a test run is never urgent.
  priority: PRIORITY.batch,
  maxAttempts: 3,
});
