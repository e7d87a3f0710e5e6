/**
 * The simulators that stand in for our peers, over the peers' own wire protocols: the carriers
 * (`carriers/`: provider_a and provider_b, REST, signed callbacks and media streams, with a simulated
 * callee) and the voice service (`voice/`: Gemini Live). The service's own rooms never import them:
 * src/service.ts starts the ones its configuration leaves without a URL and points the real adapters
 * at them; `npm run sandbox` runs them as processes of their own. `spoken-text.ts` is how the two
 * talk to each other: the callee says text as a tone-coded signal the voice simulator reads back.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Provider } from '../carriers/carrier.js';
import { startSandboxCarriers, type SandboxCarriers } from './carriers/server.js';
import { startSandboxVoiceService, type SandboxVoiceService } from './voice/server.js';

export { startSandboxCarriers, type SandboxCarriers, type CalleeScript, type SandboxCallRecord } from './carriers/server.js';
export { startSandboxVoiceService, type SandboxVoiceService } from './voice/server.js';

type SandboxConfig = Pick<
  Config,
  | 'PROVIDER_A_API_URL'
  | 'PROVIDER_B_API_URL'
  | 'SANDBOX_CARRIERS_PORT'
  | 'SANDBOX_CARRIERS_SPEED'
  | 'SANDBOX_CARRIERS_RING_MS'
  | 'VOICE_SERVICE_URL'
  | 'VOICE_SANDBOX_END_OF_TURN_MS'
  | 'VOICE_SANDBOX_MS_PER_CHAR'
  | 'VOICE_SANDBOX_SPEED'
>;

/** The simulators an instance started in-process, for what its configuration gives no URL. */
export interface Sandboxes {
  /** The sandbox carriers, and the providers that run on them (those without an API URL). */
  carriers: { server: SandboxCarriers; providers: Set<Provider> } | null;
  voice: SandboxVoiceService | null;
  close(): Promise<void>;
}

export async function startSandboxes(config: SandboxConfig, log: Logger): Promise<Sandboxes> {
  const providers = new Set<Provider>();
  if (!config.PROVIDER_A_API_URL) providers.add('provider_a');
  if (!config.PROVIDER_B_API_URL) providers.add('provider_b');
  const carriers = providers.size
    ? await startSandboxCarriers({
        port: config.SANDBOX_CARRIERS_PORT,
        speed: config.SANDBOX_CARRIERS_SPEED,
        ringMs: config.SANDBOX_CARRIERS_RING_MS,
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
    carriers: carriers ? { server: carriers, providers } : null,
    voice,
    async close() {
      await carriers?.close();
      await voice?.close();
    },
  };
}
