/**
 * Values the service sends and takes, assigned to one generator's types (test/sdk/generated-clients.test.ts
 * writes a copy per generator, with `import type * as api from './api.js'` and `api.X` its way of naming
 * the component `X`, then type-checks it with `tsc --strict`). A type that drops `null` from a nullable
 * value set, narrows "any JSON value" to objects or arrays, or takes only strings as variables fails here.
 */
import type * as api from './api.js';

// types: the components, as this generator names them (the test rewrites this block per generator)
type ToolCallRecord = api.ToolCallRecord;
type Call = api.Call;
type WebhookDelivery = api.WebhookDelivery;
type CallCreateRequest = api.CallCreateRequest;
type BatchRecipientInput = api.BatchRecipientInput;
type ErrorBody = api.ErrorBody;
// end types

export const results: Array<ToolCallRecord['result']> = [{ found: true, time: '10:00' }, ['a', 1], 'text', 3.5, false, null];
// Nullable value sets keep `null` (their other values are string literals or the generator's enum).
export const answeredBy: Array<Call['answered_by']> = [null];
export const endReasons: Array<Call['end_reason']> = [null];
export const deliveryErrors: Array<WebhookDelivery['error']> = [null];
export const variables: NonNullable<CallCreateRequest['variables']> = { name: 'Ada', count: 3, ratio: 2.5, vip: true };
export const recipientVariables: NonNullable<BatchRecipientInput['variables']> = { name: 'Grace', visits: 2, vip: false };
export const echoedVariables: Call['variables'] = { name: 'Ada', count: 3, vip: true };
export const laterCode: ErrorBody['code'] = 'a_code_added_later';
export const knownCode: ErrorBody['code'] = 'agent_not_found';
