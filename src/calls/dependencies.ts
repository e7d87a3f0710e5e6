/** What the call service and its jobs take from outside the room: the agents, and the timing of calls (configuration). */
import type { RuntimeAgent } from '../agents/service.js';

export interface CallTiming {
  ringTimeoutS: number;
  maxDurationS: number;
  dialGraceMs: number;
  orphanAfterMs: number;
}

/** AgentService as calls use it. */
export interface CallAgents {
  runtimeOf(workspaceId: string, agentId: string): Promise<RuntimeAgent | 'not_found' | 'other_workspace'>;
  /** null: the agent is gone. */
  findForRuntime(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | null>;
}
