/** Type-prefixed, time-ordered ids: `agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8R`. Lists page by id because ULIDs sort by time. */
import { monotonicFactory } from 'ulidx';

const ulid = monotonicFactory();

export const idPrefixes = {
  workspace: 'ws',
  user: 'usr',
  apiKey: 'key',
  dashboardSession: 'dss',
  agent: 'agt',
  tool: 'tool',
  document: 'doc',
  agentDocument: 'adoc',
  mcpServer: 'mcp',
  call: 'call',
  batch: 'bat',
  batchRecipient: 'brcp',
  webhook: 'whk',
  webhookDelivery: 'whd',
  event: 'evt',
  conversation: 'conv',
  request: 'req',
} as const;

export type IdKind = keyof typeof idPrefixes;

export function newId(kind: IdKind): string {
  return `${idPrefixes[kind]}_${ulid()}`;
}
