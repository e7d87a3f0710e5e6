/**
 * The voice service for the rest of the system: the Gemini Live adapter pointed at VOICE_SERVICE_URL, or,
 * when that is unset, at the sandbox voice service started here in-process (stopped by close()).
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { createGeminiLiveService } from './gemini-live.js';
import { startSandboxVoiceService, type SandboxVoiceService } from './sandbox/server.js';
import type { VoiceService } from './types.js';

export type { VoiceService } from './types.js';

type VoiceConfig = Pick<
  Config,
  | 'VOICE_SERVICE_URL'
  | 'GEMINI_API_KEY'
  | 'VOICE_MODEL'
  | 'VOICE_ANALYSIS_MODEL'
  | 'VOICE_CONNECT_TIMEOUT_MS'
  | 'VOICE_RETRY_MAX'
  | 'VOICE_RETRY_BASE_MS'
  | 'VOICE_RETRY_MAX_DELAY_MS'
  | 'VOICE_RECONNECT_QUEUE_LIMIT'
  | 'VOICE_SANDBOX_END_OF_TURN_MS'
  | 'VOICE_SANDBOX_MS_PER_CHAR'
  | 'VOICE_SANDBOX_SPEED'
>;

export interface VoiceServiceHandle extends VoiceService {
  /** The in-process sandbox, when VOICE_SERVICE_URL is unset (tests use its controls). */
  readonly sandbox: SandboxVoiceService | null;
}

export async function createVoiceService(config: VoiceConfig, log: Logger): Promise<VoiceServiceHandle> {
  const sandbox = config.VOICE_SERVICE_URL
    ? null
    : await startSandboxVoiceService({
        endOfTurnMs: config.VOICE_SANDBOX_END_OF_TURN_MS,
        msPerChar: config.VOICE_SANDBOX_MS_PER_CHAR,
        speed: config.VOICE_SANDBOX_SPEED,
      });
  const url = config.VOICE_SERVICE_URL ?? sandbox!.url;
  const voiceLog = log.child({ component: 'voice' });
  voiceLog.info({ endpoint: sandbox ? 'sandbox' : new URL(url).host, model: config.VOICE_MODEL }, 'voice service ready');
  const service = createGeminiLiveService({
    url,
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
  return {
    sandbox,
    open: (c) => service.open(c),
    analyze: (input) => service.analyze(input),
    async close() {
      await service.close();
      await sandbox?.close();
    },
  };
}
