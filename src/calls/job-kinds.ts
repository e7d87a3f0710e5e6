/** The job kinds of calls (their handlers: jobs.ts), in a file of their own so what schedules them need not import the handlers. */
import { PRIORITY, idPayload, jobKind } from '../jobs/queue.js';

/**
 * Hands a queued call to its carrier (one per call: a second add while one is pending replaces it).
 * First among due jobs: a call never waits behind any workspace's batch bookkeeping.
 */
export const DIAL_JOB = jobKind<{ call_id: string }>({
  name: 'call_dial',
  parse: idPayload('call_id'),
  key: (p) => `call_dial:${p.call_id}`,
  priority: PRIORITY.call,
});
/**
 * DIAL_JOB for a carrier that runs in-process (SIP): registered only by instances running its stack,
 * so an instance without it never takes the job. The same key, so still one dial job per call.
 */
export const IN_PROCESS_DIAL_JOB = jobKind<{ call_id: string }>({
  name: 'call_dial_in_process',
  parse: idPayload('call_id'),
  key: (p) => `call_dial:${p.call_id}`,
  priority: PRIORITY.call,
});
/** Ends a call nothing else ended in time; keyed, so a later deadline replaces the pending one (first too: it may dial a lost call). */
export const DEADLINE_JOB = jobKind<{ call_id: string }>({
  name: 'call_deadline',
  parse: idPayload('call_id'),
  key: (p) => `call_deadline:${p.call_id}`,
  priority: PRIORITY.call,
});
