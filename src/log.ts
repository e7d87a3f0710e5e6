/** The pino logger. Credentials are redacted by path as a second line of defence; code never logs them. */
import pino, { type Logger, type DestinationStream } from 'pino';

export const REDACT_PATHS = [
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'password',
  '*.password',
  'session_token',
  '*.session_token',
  'key',
  '*.key',
  'auth_token',
  '*.auth_token',
  'api_key',
  '*.api_key',
  'public_key',
  '*.public_key',
  'client_secret',
  '*.client_secret',
  'access_token',
  '*.access_token',
  'refresh_token',
  '*.refresh_token',
  'webhook_secret',
  '*.webhook_secret',
];

/** Fields of errors that can carry a request or response body (body parsers attach the raw body). */
const BODY_FIELDS = ['body', 'raw', 'rawBody', 'request', 'response', 'config'];

/** pino's error serializer, minus any body an error carries: request bodies are never logged. */
function errorWithoutBody(err: Error): Record<string, unknown> {
  const out = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  for (const f of BODY_FIELDS) delete out[f];
  return out;
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    { level, base: { service: 'voice-agent-service' }, serializers: { err: errorWithoutBody }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
    destination,
  );
}
