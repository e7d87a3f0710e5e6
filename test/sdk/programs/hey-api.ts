/**
 * A client team's program on @hey-api/openapi-ts with its fetch client (`@hey-api/client-fetch`),
 * generated from /openapi.json with default options into `./client/` (test/sdk/generated-clients.test.ts
 * generates it beside a copy of this file, type-checks it with `tsc --strict` and runs it against a
 * live service). Environment: BASE_URL, TOOL_URL, TO_NUMBER (see openapi-fetch.ts). Prints one JSON
 * line of what it saw.
 */
import { client } from './client/client.gen.js';
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
} from './client/sdk.gen.js';
import type { Call } from './client/types.gen.js';

const env = (name: string): string =>
  process.env[name] ??
  (() => {
    throw new Error(`${name} is not set`);
  })();
const BASE_URL = env('BASE_URL');
const TOOL_URL = env('TOOL_URL');
const TO_NUMBER = env('TO_NUMBER');
const hex = (n: number) => [...crypto.getRandomValues(new Uint8Array(n))].map((b) => b.toString(16).padStart(2, '0')).join('');

// The bearer token the client sends where an operation declares bearer security. Each call passes
// `throwOnError: true`: a non-2xx answer throws, and `data` is typed as the success body.
let token = '';
client.setConfig({ baseUrl: BASE_URL, auth: () => token });

const session = (
  await signup({ throwOnError: true, body: { email: `sdk-${hex(6)}@example.com`, password: 'correct-horse-battery', workspace_name: 'SDK check' } })
).data;
token = session.session_token;
const key = (await createApiKey({ throwOnError: true, body: { name: 'hey-api' } })).data;
token = key.key;

const tool = (
  await createTool({
    throwOnError: true,
    body: {
      name: 'check_order',
      description: 'Looks an order up.',
      url: `${TOOL_URL}/orders`,
      parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
    },
  })
).data;
const tested = (await testTool({ throwOnError: true, path: { tool_id: tool.tool_id }, body: { arguments: { order_id: 'A-42' } } })).data;

const agent = (
  await createAgent({
    throwOnError: true,
    body: {
      name: 'Receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      provider_a_config: { account_sid: `AC${hex(16)}`, auth_token: hex(16), phone_number: '+14155555000' },
      voicemail_config: { enabled: true },
    },
  })
).data;
for (const name of ['Second', 'Third']) await createAgent({ throwOnError: true, body: { name } });
const agentIds: string[] = [];
let cursor: string | undefined;
let pages = 0;
do {
  const page = (await listAgents({ throwOnError: true, query: { limit: 2, starting_after: cursor } })).data;
  agentIds.push(...page.data.map((a) => a.agent_id));
  cursor = page.has_more && page.next_cursor ? page.next_cursor : undefined;
  pages++;
} while (cursor);

const webhook = (await createWebhook({ throwOnError: true, body: { url: `${TOOL_URL}/hooks`, events: ['call.completed'] } })).data;

// The file goes as multipart/form-data: the generated call serializes the body as a form.
const file = new File(['We are open Monday to Friday, 8 am to 6 pm.'], 'hours.txt', { type: 'text/plain' });
const doc = (await uploadDocument({ throwOnError: true, body: { file, name: 'Opening hours' } })).data;

await attachTool({ throwOnError: true, path: { agent_id: agent.agent_id, tool_id: tool.tool_id } });
const placed = (await createCall({ throwOnError: true, body: { agent_id: agent.agent_id, to_number: TO_NUMBER } })).data;
const TERMINAL = new Set<Call['status']>(['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail']);
let call = (await getCall({ throwOnError: true, path: { call_id: placed.call_id } })).data;
for (let i = 0; i < 300 && !TERMINAL.has(call.status); i++) {
  await new Promise((r) => setTimeout(r, 100));
  call = (await getCall({ throwOnError: true, path: { call_id: placed.call_id } })).data;
}
const listed = (await listCalls({ throwOnError: true, query: { limit: 5 } })).data;
const toolCall = call.tool_calls?.find((c) => c.name === 'check_order');
const orderId: unknown = toolCall?.arguments.order_id;

const realtime = (await createRealtimeSession({ throwOnError: true, body: { agent_id: agent.agent_id, user_id: 'user-42', source: 'voice' } })).data;

console.log(
  JSON.stringify({
    generator: 'hey-api',
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
