/**
 * A client team's program on orval's fetch client (`client: 'fetch'`, one file, the fetch of
 * ./fetcher.ts as mutator), generated from /openapi.json into `./api.ts`
 * (test/sdk/generated-clients.test.ts generates it beside a copy of this file, type-checks it with
 * `tsc --strict` and runs it against a live service). Environment: BASE_URL, TOOL_URL, TO_NUMBER (see
 * openapi-fetch.ts). Prints one JSON line of what it saw.
 */
import {
  attachTool,
  createAgent,
  createApiKey,
  createCall,
  createRealtimeSession,
  createTool,
  createWebhook,
  getCall,
  listAgents,
  listCalls,
  signup,
  testTool,
  uploadDocument,
} from './api.js';
import type { Call } from './api.js';
import { setToken } from './fetcher.js';

const env = (name: string): string =>
  process.env[name] ??
  (() => {
    throw new Error(`${name} is not set`);
  })();
const TOOL_URL = env('TOOL_URL');
const TO_NUMBER = env('TO_NUMBER');
env('BASE_URL');
/** The body of the success status expected (orval types each status's body; the fetcher throws on any non-2xx). */
function body<R extends { status: number; data: unknown }, S extends R['status']>(res: R, status: S): Extract<R, { status: S }>['data'] {
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(res.data)}`);
  return res.data as Extract<R, { status: S }>['data'];
}
const hex = (n: number) => [...crypto.getRandomValues(new Uint8Array(n))].map((b) => b.toString(16).padStart(2, '0')).join('');

const session = body(await signup({ email: `sdk-${hex(6)}@example.com`, password: 'correct-horse-battery', workspace_name: 'SDK check' }), 201);
setToken(session.session_token);
const key = body(await createApiKey({ name: 'orval' }), 201);
setToken(key.key);

const tool = body(
  await createTool({
    name: 'check_order',
    description: 'Looks an order up.',
    url: `${TOOL_URL}/orders`,
    parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
  }),
  201,
);
const tested = body(await testTool(tool.tool_id, { arguments: { order_id: 'A-42' } }), 200);

const agent = body(
  await createAgent({
    name: 'Receptionist',
    instruction: 'You are the receptionist of Acme Dental.',
    first_message: 'Hello! This is Acme Dental.',
    provider_a_config: { account_sid: `AC${hex(16)}`, auth_token: hex(16), phone_number: '+14155555000' },
    voicemail_config: { enabled: true },
  }),
  201,
);
for (const name of ['Second', 'Third']) await createAgent({ name });
const agentIds: string[] = [];
let cursor: string | undefined;
let pages = 0;
do {
  const page = body(await listAgents({ limit: 2, starting_after: cursor }), 200);
  agentIds.push(...page.data.map((a) => a.agent_id));
  cursor = page.has_more && page.next_cursor ? page.next_cursor : undefined;
  pages++;
} while (cursor);

const webhook = body(await createWebhook({ url: `${TOOL_URL}/hooks`, events: ['call.completed'] }), 201);

// The generated function builds the multipart/form-data body from the File.
const file = new File(['We are open Monday to Friday, 8 am to 6 pm.'], 'hours.txt', { type: 'text/plain' });
const doc = body(await uploadDocument({ file, name: 'Opening hours' }), 201);

await attachTool(agent.agent_id, tool.tool_id);
const placed = body(await createCall({ agent_id: agent.agent_id, to_number: TO_NUMBER }), 201);
const TERMINAL = new Set<Call['status']>(['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail']);
let call = body(await getCall(placed.call_id), 200);
for (let i = 0; i < 300 && !TERMINAL.has(call.status); i++) {
  await new Promise((r) => setTimeout(r, 100));
  call = body(await getCall(placed.call_id), 200);
}
const listed = body(await listCalls({ limit: 5 }), 200);
const toolCall = call.tool_calls?.find((c) => c.name === 'check_order');
const orderId: unknown = toolCall?.arguments.order_id;

const realtime = body(await createRealtimeSession({ agent_id: agent.agent_id, user_id: 'user-42', source: 'voice' }), 201);

console.log(
  JSON.stringify({
    generator: 'orval',
    key_prefix: key.key_prefix,
    tool_test_ok: tested.ok,
    voicemail: agent.voicemail_config,
    agents: agentIds.length,
    pages,
    webhook_id: webhook.webhook_id,
    document: { name: doc.name, content_type: doc.content_type, status: doc.status },
    call_status: call.status,
    listed_call: listed.data.some((c) => c.call_id === placed.call_id),
    tool_call_arguments: toolCall?.arguments ?? null,
    order_id: orderId,
    realtime_token: realtime.session_token.length > 0,
  }),
);
