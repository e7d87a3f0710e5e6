/**
 * Why an outbound call cannot be placed now, as data: the batch engine records the code as the batch's
 * failure reason, and the API answers with `refusalError` (one mapping from refusal to status, so no
 * caller reads an HTTP status to learn what happened).
 */
import { ApiError, notFound, otherWorkspace, paymentRequired, unprocessable, withParam } from '../errors/api-error.js';
import { agentNotFound } from '../agents/service.js';

export type CallRefusal =
  | { code: 'agent_not_found'; agentId: string }
  | { code: 'agent_version_not_found'; agentId: string; version: number }
  /** The agent belongs to another workspace. */
  | { code: 'forbidden' }
  | { code: 'provider_not_configured'; message: string }
  | { code: 'provider_required' }
  | { code: 'from_number_missing'; message: string }
  /** The calling number is not one a call may come from (src/destinations). */
  | { code: 'invalid_phone_number' | 'caller_id_not_allowed'; message: string }
  /** The workspace of the credential no longer exists. */
  | { code: 'unauthorized' }
  /** `message`: a more precise explanation (what is left is held by live conversations). */
  | { code: 'subscription_inactive' | 'plan_limit_reached' | 'insufficient_credit'; message?: string };

export const isRefusal = (x: object): x is CallRefusal => 'code' in x;

const BILLING_MESSAGES = {
  subscription_inactive: 'The workspace subscription is not active; update billing to place calls.',
  plan_limit_reached: "The workspace's plan has used its conversation minutes for this month.",
  insufficient_credit: 'The workspace has no credit left; add credit to place calls.',
} as const;

/** The API's answer to a refusal. */
export function refusalError(r: CallRefusal): ApiError<401 | 402 | 403 | 404 | 422> {
  switch (r.code) {
    case 'agent_not_found':
      return agentNotFound(r.agentId);
    case 'agent_version_not_found':
      return notFound('agent_version_not_found', `Agent ${r.agentId} has no version ${r.version}.`, 'agent_version');
    case 'forbidden':
      return withParam(otherWorkspace('agent'), 'agent_id');
    case 'provider_not_configured':
      return unprocessable('provider_not_configured', r.message, 'provider');
    case 'provider_required':
      return unprocessable('provider_required', 'The agent has both providers configured; say which one places the call.', 'provider');
    case 'from_number_missing':
      return unprocessable('from_number_missing', r.message, 'from_number');
    case 'invalid_phone_number':
    case 'caller_id_not_allowed':
      return unprocessable(r.code, r.message, 'from_number');
    case 'unauthorized':
      return new ApiError(401, 'authentication_error', 'unauthorized', 'The workspace of this API key no longer exists.');
    default:
      return paymentRequired(r.code, r.message ?? BILLING_MESSAGES[r.code]);
  }
}
