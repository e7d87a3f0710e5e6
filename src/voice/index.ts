/** The voice service for the rest of the system: the Gemini Live adapter pointed at the voice service's URL. */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { createGeminiLiveService } from './gemini-live.js';
import type { VoiceService } from './types.js';

export type { VoiceService } from './types.js';

type VoiceConfig = Pick<
  Config,
  | 'GEMINI_API_KEY'
  | 'VOICE_MODEL'
  | 'VOICE_ANALYSIS_MODEL'
  | 'VOICE_CONNECT_TIMEOUT_MS'
  | 'VOICE_RETRY_MAX'
  | 'VOICE_RETRY_BASE_MS'
  | 'VOICE_RETRY_MAX_DELAY_MS'
  | 'VOICE_RECONNECT_QUEUE_LIMIT'
>;

/**
 * `url`: VOICE_SERVICE_URL, or the sandbox voice service's when it is unset (src/service.ts starts it);
 * `sandbox` only says which, for the log.
 */
export function createVoiceService(config: VoiceConfig, endpoint: { url: string; sandbox: boolean }, log: Logger): VoiceService {
  const voiceLog = log.child({ component: 'voice' });
  voiceLog.info({ endpoint: endpoint.sandbox ? 'sandbox' : new URL(endpoint.url).host, model: config.VOICE_MODEL }, 'voice service ready');
  return createGeminiLiveService({
    url: endpoint.url,
    apiKey: config.GEMINI_API_KEY,
    model: config.VOICE_MODEL,
    analysisModel: config.VOICE_ANALYSIS_MODEL,
    connectTimeoutMs: config.VOICE_CONNECT_TIMEOUT_MS,
    retryMax: config.VOICE_RETRY_MAX,
    retryBaseMs: config.VOICE_RETRY_BASE_MS,
    retryMaxDelayMs: config.VOICE_RETRY_MAX_DELAY_MS,
    reconnectQueueLimit: config.VOICE_RECONNECT_QUEUE_LIMIT,
    log: voiceLog,
  });
}
