/**
 * Every environment variable the service reads, parsed and validated once at start-up.
 * A bad value stops start-up with a message naming the variable.
 */
import { z } from 'zod';
import path from 'node:path';

const durationMs = (def: number) => z.coerce.number().int().min(0).default(def);

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  EMBEDDED_PG_PORT: z.coerce.number().int().min(1).max(65535).default(54329),
  PUBLIC_BASE_URL: z.string().url('must be an absolute http(s) URL').regex(/^https?:\/\//, 'must start with http:// or https://').optional(),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  CORS_ORIGINS: z
    .string()
    .default('http://localhost:3000,http://127.0.0.1:3000,http://localhost:5173')
    .transform((s) => s.split(',').map((o) => o.trim()).filter(Boolean))
    .pipe(z.array(z.string().regex(/^https?:\/\/[^/]+$/, 'each origin must look like https://host[:port]'))),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SECRETS_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/]{43}=$|^[0-9a-fA-F]{64}$/, 'must be 32 bytes as base64 (44 chars) or hex (64 chars)')
    .optional(),
  /** JSON request body limit in bytes. */
  BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024),
  /** Dashboard session lifetime. */
  SESSION_TTL_MS: durationMs(12 * 60 * 60 * 1000),
  /** `last_used_at` of an API key is written at most once per this interval. */
  KEY_LAST_USED_RESOLUTION_MS: durationMs(60_000),
  /** Grace period on SIGTERM before open connections are cut. */
  SHUTDOWN_GRACE_MS: durationMs(10_000),
  /** Check every response against the contract: off, log (development default) or enforce (tests). */
  CONTRACT_CHECK: z.enum(['off', 'log', 'enforce']).optional(),
  /** Directory where the contract check records (operationId, status) pairs; tests set it. */
  CONTRACT_COVERAGE_DIR: z.string().optional(),
  /**
   * Hosts, IP addresses or CIDR ranges that webhooks, tools and MCP servers may call although they are
   * internal (comma-separated). Production refuses loopback/private/link-local/metadata addresses otherwise.
   */
  OUTBOUND_ALLOW_LIST: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((o) => o.trim()).filter(Boolean)),
  /** Signup/login attempts per IP per minute. */
  AUTH_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(30),
});

export type Config = z.infer<typeof schema> & {
  publicBaseUrl: string;
  contractCheck: 'off' | 'log' | 'enforce';
  dataDir: string;
};

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means unset (as in `ADMIN_TOKEN= npm start`).
  const parsed = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== '')));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  if (c.NODE_ENV === 'production') {
    if (!c.SECRETS_KEY) throw new ConfigError('Invalid configuration:\n  SECRETS_KEY: required when NODE_ENV=production');
    if (!c.PUBLIC_BASE_URL) throw new ConfigError('Invalid configuration:\n  PUBLIC_BASE_URL: required when NODE_ENV=production');
  }
  const host = c.HOST === '0.0.0.0' || c.HOST === '::' ? 'localhost' : c.HOST;
  return {
    ...c,
    dataDir: path.resolve(c.DATA_DIR),
    publicBaseUrl: (c.PUBLIC_BASE_URL ?? `http://${host}:${c.PORT}`).replace(/\/+$/, ''),
    contractCheck: c.CONTRACT_CHECK ?? (c.NODE_ENV === 'production' ? 'off' : 'log'),
  };
}
