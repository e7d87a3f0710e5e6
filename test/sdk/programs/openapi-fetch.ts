/**
 * A client team's program on openapi-typescript + openapi-fetch, generated from /openapi.json with
 * default options (test/sdk/generated-clients.test.ts generates `./schema.d.ts` beside a copy of this
 * file, type-checks it with `tsc --strict` and runs it against a live service). Environment:
 * BASE_URL (the service), TOOL_URL (an HTTP endpoint the tool and the webhook may call), TO_NUMBER (a
 * sandbox number whose callee asks for `check_order`). Prints one JSON line of what it saw.
 */
import createClient from 'openapi-fetch';
import type { paths } from './schema.js';

const env = (name: string): string =>
  process.env[name] ??
  (() => {
    throw new Error(`${name} is not set`);
  })();
const BASE_URL = env('BASE_URL');
const TOOL_URL = env('TOOL_URL');
const TO_NUMBER = env('TO_NUMBER');
const hex = (n: number) => [...crypto.getRandomValues(new Uint8Array(n))].map((b) => b.toString(16).padStart(2, '0')).join('');

function ok<T>(r: { data?: T; error?: unknown; response: Response }, what: string): T {
  if (r.data === undefined) throw new Error(`${what}: ${r.response.status} ${JSON.stringify(r.error)}`);
  return r.data;
}

// Sign up (no credentials), then a key (dashboard session only).
const anonymous = createClient<paths>({ baseUrl: BASE_URL });
const session = ok(
  await anonymous.POST('/api/v1/auth/signup', { body: { email: `sdk-${hex(6)}@example.com`, password: 'correct-horse-battery', workspace_name: 'SDK check' } }),
  'signup',
);
const dashboard = createClient<paths>({ baseUrl: BASE_URL, headers: { Authorization: `Bearer ${session.session_token}` } });
const key = ok(await dashboard.POST('/api/v1/keys', { body: { name: 'openapi-fetch' } }), 'create key');
const api = createClient<paths>({ baseUrl: BASE_URL, headers: { Authorization: `Bearer ${key.key}` } });

// A tool, tested with arguments.
const tool = ok(
  await api.POST('/api/v1/tools', {
    body: {
      name: 'check_order',
      description: 'Looks an order up.',
      url: `${TOOL_URL}/orders`,
      parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
    },
  }),
  'create tool',
);
const tested = ok(
  await api.POST('/api/v1/tools/{tool_id}/test', { params: { path: { tool_id: tool.tool_id } }, body: { arguments: { order_id: 'A-42' } } }),
  'test tool',
);

// An agent with a provider config and a partial voicemail config; two more; paged through.
const agent = ok(
  await api.POST('/api/v1/agents', {
    body: {
      name: 'Receptionist',
      instruction: 'You are the receptionist of Acme Dental.',
      first_message: 'Hello! This is Acme Dental.',
      provider_a_config: { account_sid: `AC${hex(16)}`, auth_token: hex(16), phone_number: '+14155555000' },
      voicemail_config: { enabled: true },
    },
  }),
  'create agent',
);
for (const name of ['Second', 'Third']) ok(await api.POST('/api/v1/agents', { body: { name } }), 'create agent');
const agentIds: string[] = [];
let cursor: string | undefined;
let pages = 0;
do {
  const page = ok(await api.GET('/api/v1/agents', { params: { query: { limit: 2, starting_after: cursor } } }), 'list agents');
  agentIds.push(...page.data.map((a) => a.agent_id));
  cursor = page.has_more && page.next_cursor ? page.next_cursor : undefined;
  pages++;
} while (cursor);

// A webhook.
const webhook = ok(await api.POST('/api/v1/webhooks', { body: { url: `${TOOL_URL}/hooks`, events: ['call.completed'] } }), 'create webhook');

// A document uploaded as a file (multipart/form-data). openapi-typescript types `format: binary` as a
// string, so the File goes in through the body serializer.
const file = new File(['We are open Monday to Friday, 8 am to 6 pm.'], 'hours.txt', { type: 'text/plain' });
const doc = ok(
  await api.POST('/api/v1/documents', {
    body: { file: file.name, name: 'Opening hours' },
    bodySerializer: (body) => {
      const form = new FormData();
      form.append('file', file);
      if (body.name) form.append('name', body.name);
      return form;
    },
  }),
  'upload document',
);

// A call in which the agent calls the tool; its tool calls' arguments read back.
ok(await api.PUT('/api/v1/agents/{agent_id}/tools/{tool_id}', { params: { path: { agent_id: agent.agent_id, tool_id: tool.tool_id } } }), 'attach tool');
const placed = ok(await api.POST('/api/v1/calls', { body: { agent_id: agent.agent_id, to_number: TO_NUMBER } }), 'create call');
const TERMINAL = new Set(['completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail']);
let call = ok(await api.GET('/api/v1/calls/{call_id}', { params: { path: { call_id: placed.call_id } } }), 'get call');
for (let i = 0; i < 300 && !TERMINAL.has(call.status); i++) {
  await new Promise((r) => setTimeout(r, 100));
  call = ok(await api.GET('/api/v1/calls/{call_id}', { params: { path: { call_id: placed.call_id } } }), 'get call');
}
const listed = ok(await api.GET('/api/v1/calls', { params: { query: { limit: 5 } } }), 'list calls');
const toolCall = call.tool_calls?.find((c) => c.name === 'check_order');
const orderId: unknown = toolCall?.arguments.order_id;

// A realtime session.
const realtime = ok(
  await api.POST('/api/v1/realtime/sessions', { body: { agent_id: agent.agent_id, user_id: 'user-42', source: 'voice' } }),
  'create realtime session',
);

console.log(
  JSON.stringify({
    generator: 'openapi-fetch',
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
