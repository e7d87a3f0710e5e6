/** Type-prefixed, time-ordered ids: `agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8R`. Lists page by id because ULIDs sort by time. */
import { randomBytes } from 'node:crypto';
import { monotonicFactory, ulid as randomUlid } from 'ulidx';

// ulidx draws each random character with its own getRandomValues call (16 per id, a few percent of a
// request's CPU for the request id alone); this feeds it from a pooled buffer of the same source.
const POOL_SIZE = 4096;
let pool = randomBytes(POOL_SIZE);
let offset = 0;
function pooledRandom(): number {
  if (offset === POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    offset = 0;
  }
  return pool[offset++] / 0xff;
}

const ulid = monotonicFactory(pooledRandom);
const freshUlid = () => randomUlid(undefined, pooledRandom);

export const idPrefixes = {
  workspace: 'ws',
  user: 'usr',
  apiKey: 'key',
  dashboardSession: 'dss',
  agent: 'agt',
  tool: 'tool',
  document: 'doc',
  agentDocument: 'adoc',
  recording: 'rec',
  mcpServer: 'mcp',
  sipTrunk: 'trk',
  call: 'call',
  callTransfer: 'xfr',
  batch: 'bat',
  batchRecipient: 'brcp',
  doNotCall: 'dnc',
  webhook: 'whk',
  webhookDelivery: 'whd',
  event: 'evt',
  conversation: 'conv',
  agentTest: 'tst',
  testRun: 'trun',
  testCase: 'tcase',
  request: 'req',
} as const;

export type IdKind = keyof typeof idPrefixes;

export function newId(kind: IdKind): string {
  return `${idPrefixes[kind]}_${ulid()}`;
}

/**
 * For ids that are public and must not be guessable from another (an agent id opens its public
 * profile): all 80 random bits drawn afresh. Ids from newId are the previous id of the same millisecond
 * plus one, and request ids from that factory reach every caller in X-Request-Id.
 */
export function newUnguessableId(kind: IdKind): string {
  return `${idPrefixes[kind]}_${freshUlid()}`;
}
