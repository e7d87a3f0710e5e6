/** The one error class of the library: every rejection and `error` event carries a `code`. */

/** Why `session.start()` rejected. */
export type StartErrorCode =
  | 'mint_failed'
  | 'invalid_token'
  | 'rate_limited'
  | 'limit_reached'
  | 'billing_blocked'
  | 'source_not_enabled'
  | 'model_refused'
  | 'server_error'
  | 'permission_denied'
  | 'media_unavailable'
  | 'aborted';

/**
 * Codes of the `error` event of a live session: the server's in-session `error` codes (`forward_failed`,
 * `no_audio_received`, `upstream_unavailable`, ...), `connection_lost` (the socket closed without
 * `stop()`), `media_ended` (the browser stopped the camera, the shared screen or the microphone).
 */
export type SessionErrorCode = 'connection_lost' | 'media_ended' | (string & {});

export type VoiceAgentErrorCode = StartErrorCode | SessionErrorCode | 'not_live';

export class VoiceAgentError extends Error {
  readonly code: VoiceAgentErrorCode;
  /** The WebSocket close code, when the error comes from a close. */
  readonly closeCode?: number;

  constructor(code: VoiceAgentErrorCode, message: string, options: { closeCode?: number; cause?: unknown } = {}) {
    super(message);
    this.name = 'VoiceAgentError';
    this.code = code;
    if (options.closeCode !== undefined) this.closeCode = options.closeCode;
    if (options.cause !== undefined) (this as { cause?: unknown }).cause = options.cause;
  }
}

const CLOSE_CODES: Record<number, StartErrorCode> = {
  4001: 'invalid_token',
  4029: 'rate_limited',
  4028: 'limit_reached',
  4402: 'billing_blocked',
  4003: 'source_not_enabled',
  4022: 'model_refused',
};

/** The `start()` error for a socket that closed before `session_started`. */
export function refusal(code: number, reason: string): VoiceAgentError {
  const mapped = CLOSE_CODES[code] ?? 'server_error';
  const detail = reason ? `${code} ${reason}` : String(code);
  const message =
    mapped === 'server_error' && code === 1006
      ? 'The connection to the voice agent service failed (1006: refused before opening, or the network failed).'
      : `The voice agent service refused the session (${detail}).`;
  return new VoiceAgentError(mapped, message, { closeCode: code });
}

/** getUserMedia/getDisplayMedia failures: a refusal, or no usable device. */
export function mediaError(err: unknown, what: string): VoiceAgentError {
  const name = err instanceof DOMException || err instanceof Error ? err.name : '';
  if (name === 'NotAllowedError' || name === 'SecurityError' || name === 'PermissionDeniedError') {
    return new VoiceAgentError('permission_denied', `Access to the ${what} was refused.`, { cause: err });
  }
  const detail = err instanceof Error && err.message ? `: ${err.message}` : '';
  return new VoiceAgentError('media_unavailable', `The ${what} could not be opened (${name || 'unknown error'}${detail}).`, { cause: err });
}
