/** What the call service and its jobs take from outside the room: the agents, and the timing of calls (configuration). */
import type { RuntimeAgent, RuntimeMiss } from '../agents/service.js';

export interface CallTiming {
  ringTimeoutS: number;
  maxDurationS: number;
  dialGraceMs: number;
  orphanAfterMs: number;
}

/** AgentService as calls use it. */
export interface CallAgents {
  /** `version` omitted: the published one, read fresh. */
  runtimeOf(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | RuntimeMiss>;
  /** null: the agent is gone. */
  findForRuntime(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | null>;
}
