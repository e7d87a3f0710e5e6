/**
 * How the sandbox voice service takes a setup's `realtimeInputConfig` (documented in the README, so
 * tests can assert exact behaviour):
 * - `automaticActivityDetection.silenceDurationMs`: the silence that ends a spoken turn (else
 *   VOICE_SANDBOX_END_OF_TURN_MS); `endOfSpeechSensitivity` END_SENSITIVITY_LOW doubles it.
 * - `prefixPaddingMs`: the speech a turn (and a barge-in) needs before it starts (else 100 ms).
 * - `startOfSpeechSensitivity` START_SENSITIVITY_LOW doubles the energy that counts as speech.
 * - `activityHandling` NO_INTERRUPTION: speech never cuts the reply being spoken; a turn taken during
 *   it is answered once it has been spoken (its input transcription is sent at once).
 * - `disabled` (client-signalled activity) is not supported: such a setup is refused (1007).
 */
import type { RealtimeInputConfig } from '@google/genai';

/** The service's own turn detection (its SandboxTiming), which a setup adjusts. */
export interface TurnDetectionBase {
  endOfTurnMs: number;
  minSpeechMs: number;
  speechRms: number;
}

export interface TurnRules extends TurnDetectionBase {
  /** Speech cuts the reply being spoken (barge-in). */
  interrupts: boolean;
}

export function turnRules(timing: TurnDetectionBase, config: RealtimeInputConfig | undefined): TurnRules {
  const detection = config?.automaticActivityDetection;
  const endLow = String(detection?.endOfSpeechSensitivity) === 'END_SENSITIVITY_LOW';
  const startLow = String(detection?.startOfSpeechSensitivity) === 'START_SENSITIVITY_LOW';
  return {
    endOfTurnMs: (detection?.silenceDurationMs ?? timing.endOfTurnMs) * (endLow ? 2 : 1),
    minSpeechMs: detection?.prefixPaddingMs ?? timing.minSpeechMs,
    speechRms: timing.speechRms * (startLow ? 2 : 1),
    interrupts: String(config?.activityHandling) !== 'NO_INTERRUPTION',
  };
}
