/**
 * One REST request to a carrier and the reading of its answer, for both adapters: a deadline, no
 * redirects, network failures and timeouts as `unavailable`, and a non-2xx answer as a CarrierError
 * whose kind follows the status and whose message and code come from the carrier's own error shape.
 */
import { CarrierError } from './carrier.js';

/** A carrier REST answer that is not a success, as a CarrierError. */
export function carrierErrorFromStatus(status: number, message: string, code?: string): CarrierError {
  if (status === 401 || status === 403) return new CarrierError('auth', message, { status, code });
  if (status === 404) return new CarrierError('not_found', message, { status, code });
  if (status >= 500 || status === 429) return new CarrierError('unavailable', message, { status, code });
  return new CarrierError('refused', message, { status, code });
}

/** The message and code a carrier's error body gives, if any. */
export type ErrorReader = (body: Record<string, unknown>) => { message: string | null; code: string | null };

/**
 * Sends the request and reads the answer: its JSON body (`{}` when empty or not JSON: a success is
 * judged by the status alone), or throws a CarrierError.
 */
export async function carrierRequest(
  url: string,
  init: RequestInit,
  opts: { timeoutMs: number; provider: string; readError: ErrorReader },
): Promise<Record<string, unknown>> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, redirect: 'manual', signal: AbortSignal.timeout(opts.timeoutMs) });
  } catch (err) {
    const e = err as Error;
    throw new CarrierError('unavailable', e.name === 'TimeoutError' ? `no answer within ${opts.timeoutMs} ms` : `request failed: ${e.message}`);
  }
  const text = await res.text().catch(() => '');
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = text ? JSON.parse(text) : {};
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    /* not JSON: judged by the status alone */
  }
  if (res.status >= 200 && res.status < 300) return body;
  const { message, code } = opts.readError(body);
  throw carrierErrorFromStatus(res.status, message || `${opts.provider} answered ${res.status}`, code ?? undefined);
}
