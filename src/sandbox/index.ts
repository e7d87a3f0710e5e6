/**
 * The simulators that stand in for our peers, over the peers' own wire protocols: the carriers
 * (`carriers/`: provider_a and provider_b, REST, signed callbacks and media streams, with a simulated
 * callee; with SIP on, the far end of a SIP trunk) and the voice service (`voice/`: Gemini Live). The
 * service's own rooms never import them: src/service.ts starts the ones its configuration leaves
 * without a URL and points the real adapters at them; `npm run sandbox` runs them as processes of their own. `spoken-text.ts` is how the two
 * talk to each other: the callee says text as a tone-coded signal the voice simulator reads back.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { CarrierSettings, Provider } from '../carriers/index.js';
import { startSandboxCarriers, type SandboxCarriers } from './carriers/server.js';
import { SIMULATORS } from './carriers/simulators.js';
import type { SipFarEndOptions } from './carriers/sip.js';
import { startSandboxVoiceService, type SandboxVoiceService } from './voice/server.js';

export { startSandboxCarriers, type SandboxCarriers, type CalleeScript, type SandboxCallRecord } from './carriers/server.js';
export { startSandboxVoiceService, type SandboxVoiceService } from './voice/server.js';

type SandboxConfig = Pick<
  Config,
  | 'carrierApiUrls'
  | 'SANDBOX_CARRIERS_PORT'
  | 'SANDBOX_CARRIERS_SPEED'
  | 'SANDBOX_CARRIERS_RING_MS'
  | 'VOICE_SERVICE_URL'
  | 'VOICE_SANDBOX_END_OF_TURN_MS'
  | 'VOICE_SANDBOX_MS_PER_CHAR'
  | 'VOICE_SANDBOX_SPEED'
  | 'NODE_ENV'
  | 'SIP_PORT'
  | 'SIP_HOST'
  | 'SIP_TRANSPORTS'
  | 'SIP_RTP_PORT_MIN'
  | 'SIP_RTP_PORT_MAX'
>;

/** The simulators an instance started in-process, for what its configuration gives no URL. */
export interface Sandboxes {
  /**
   * The sandbox carriers, the providers that run on them (those with a simulator and no API URL), and
   * those providers' plug-in options (pointing their adapters at the simulators).
   */
  carriers: { server: SandboxCarriers; providers: Set<Provider>; settings: CarrierSettings } | null;
  voice: SandboxVoiceService | null;
  close(): Promise<void>;
}

export async function startSandboxes(config: SandboxConfig, log: Logger): Promise<Sandboxes> {
  const providers = new Set(SIMULATORS.map((s) => s.provider).filter((p) => !config.carrierApiUrls[p]));
  const sip = sipFarEnd(config);
  if (sip) providers.add('sip');
  const carriers = providers.size
    ? await startSandboxCarriers({
        port: config.SANDBOX_CARRIERS_PORT,
        speed: config.SANDBOX_CARRIERS_SPEED,
        ringMs: config.SANDBOX_CARRIERS_RING_MS,
        sip,
        log: log.child({ component: 'sandbox-carriers' }),
      })
    : null;
  const voice = config.VOICE_SERVICE_URL
    ? null
    : await startSandboxVoiceService({
        endOfTurnMs: config.VOICE_SANDBOX_END_OF_TURN_MS,
        msPerChar: config.VOICE_SANDBOX_MS_PER_CHAR,
        speed: config.VOICE_SANDBOX_SPEED,
      });
  return {
    carriers: carriers
      ? {
          server: carriers,
          providers,
          settings: Object.fromEntries(
            [...providers].filter((p) => SIMULATORS.some((s) => s.provider === p)).map((p) => [p, carriers.pluginOptions(p)]),
          ) as CarrierSettings,
        }
      : null,
    voice,
    async close() {
      await carriers?.close();
      await voice?.close();
    },
  };
}

/**
 * With SIP on outside production, the far end of a SIP trunk: a trunk whose termination is its
 * `host:port` reaches the sandbox's callees, and inbound calls ring the service's SIP port from it.
 */
function sipFarEnd(config: SandboxConfig): SipFarEndOptions | undefined {
  if (config.SIP_PORT === undefined || config.NODE_ENV === 'production') return undefined;
  const host = config.SIP_HOST === '0.0.0.0' ? '127.0.0.1' : config.SIP_HOST === '::' ? '::1' : config.SIP_HOST;
  return {
    host,
    service: { host, port: config.SIP_PORT, transport: config.SIP_TRANSPORTS.includes('udp') ? 'udp' : 'tcp' },
    rtp: { min: config.SIP_RTP_PORT_MIN, max: config.SIP_RTP_PORT_MAX },
  };
}
