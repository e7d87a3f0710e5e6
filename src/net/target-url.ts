import { unprocessable } from '../errors/api-error.js';
import { BlockedUrlError, checkUrl, type OutboundPolicy } from './outbound-guard.js';

/**
 * The write-time check of a URL the service will call on a user's behalf: a 422 `url_not_allowed`
 * naming `param` unless it passes the outbound guard. With `acceptUnresolvable`, a host that does not
 * resolve yet is kept, since the guard checks the address again at every request.
 */
export async function checkTargetUrl(policy: OutboundPolicy, url: string, param: string, opts: { acceptUnresolvable: boolean }): Promise<void> {
  try {
    await checkUrl(policy, url);
  } catch (err) {
    if (!(err instanceof BlockedUrlError)) throw err;
    if (err.reason === 'unresolvable' && opts.acceptUnresolvable) return;
    throw unprocessable('url_not_allowed', err.message, param);
  }
}
