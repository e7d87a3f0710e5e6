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

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino({ level, base: { service: 'voice-agent-service' }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, destination);
}
