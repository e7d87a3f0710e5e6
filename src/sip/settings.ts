/** The SIP user agent's options from the service's configuration (the assembly reads them). */
import fs from 'node:fs';
import type { Config } from '../config.js';
import type { SipUserAgentOptions } from './user-agent.js';

/** The user agent's settings from the configuration, or undefined when SIP_PORT is unset (no SIP). */
export function sipOptionsFromConfig(config: Config, hooks: Pick<SipUserAgentOptions, 'authenticateInbound' | 'log'>): SipUserAgentOptions | undefined {
  if (config.SIP_PORT === undefined) return undefined;
  const tls =
    config.SIP_TLS_CERT_PATH && config.SIP_TLS_KEY_PATH
      ? { port: config.SIP_TLS_PORT, cert: fs.readFileSync(config.SIP_TLS_CERT_PATH), key: fs.readFileSync(config.SIP_TLS_KEY_PATH) }
      : undefined;
  return {
    host: config.SIP_HOST,
    port: config.SIP_PORT,
    advertisedAddress: config.SIP_ADVERTISED_ADDRESS ?? '127.0.0.1',
    transports: tls ? config.SIP_TRANSPORTS : config.SIP_TRANSPORTS.filter((t) => t !== 'tls'),
    tls,
    verifyTlsPeers: config.NODE_ENV === 'production',
    rtp: { min: config.SIP_RTP_PORT_MIN, max: config.SIP_RTP_PORT_MAX },
    timers: { t1: config.SIP_T1_MS, t2: config.SIP_T2_MS, t4: config.SIP_T4_MS },
    nonceTtlMs: config.SIP_NONCE_TTL_MS,
    refusalsPerMinute: config.SIP_REFUSALS_PER_MINUTE,
    jitterDepth: config.SIP_JITTER_PACKETS,
    receiveOnTick: config.SIP_RTP_RECEIVE_ON_TICK,
    sessionExpiresS: config.SIP_SESSION_EXPIRES_S,
    minSessionExpiresS: config.SIP_MIN_SESSION_EXPIRES_S,
    idleConnectionMs: config.SIP_IDLE_CONNECTION_MS,
    maxConnections: config.SIP_MAX_CONNECTIONS,
    ...hooks,
  };
}
