/**
 * An agent's `conversation` settings (the contract's ConversationSettings): turn detection,
 * interruptions, the idle ladder and the maximum duration. Stored whole on the agent; a call, batch or
 * web session overrides them field by field (a field given replaces the agent's, `null` included), and
 * the result is copied onto the call as it is created, so the conversation runs with the settings it
 * started with. The contract bounds every field; the one rule it cannot say is checked here. It lives
 * with the voice adapter, which sends the turn-taking part in its setup (gemini-live.ts), so that the
 * agents, the conversation engine, calls, web sessions and batches can all read it.
 */
import type { components } from '../../generated/openapi.js';
import { unprocessable } from '../errors/api-error.js';

export type ConversationSettings = components['schemas']['ConversationSettings'];
export type ConversationSettingsInput = components['schemas']['ConversationSettingsInput'];
export type IdleSettings = NonNullable<ConversationSettings['idle']>;
export type TurnDetection = NonNullable<ConversationSettings['turn_detection']>;
export type Interruptions = ConversationSettings['interruptions'];

const has = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

/** Every field at its default: the voice service's turn detection, barge-in, no idle ladder, no maximum of its own. */
export const DEFAULT_SETTINGS: ConversationSettings = Object.freeze<ConversationSettings>({
  turn_detection: null,
  interruptions: 'always',
  idle: null,
  max_duration_seconds: null,
});

function turnDetection(input: ConversationSettingsInput['turn_detection']): TurnDetection | null {
  if (!input) return null;
  const t: TurnDetection = {
    start_sensitivity: input.start_sensitivity ?? null,
    end_sensitivity: input.end_sensitivity ?? null,
    silence_ms: input.silence_ms ?? null,
    prefix_padding_ms: input.prefix_padding_ms ?? null,
  };
  return Object.values(t).every((v) => v === null) ? null : t;
}

function idle(input: ConversationSettingsInput['idle'], param: string): IdleSettings | null {
  if (!input) return null;
  const reminders = input.reminders ?? [];
  const max = input.max_reminders ?? reminders.length;
  if (max > 0 && reminders.length === 0) {
    throw unprocessable(
      'invalid_value',
      `max_reminders is ${max} but there are no reminders to say; give reminders or set max_reminders to 0.`,
      `${param}.idle.reminders`,
    );
  }
  return { idle_ms: input.idle_ms, reminders: [...reminders], max_reminders: max, goodbye_message: input.goodbye_message ?? null };
}

/**
 * The settings a body gives, onto `base` (the agent's, for a call or session; the defaults, for an
 * agent): only the fields present change. 422 naming the field (under `param`) for what the contract
 * cannot refuse. Null or absent input: `base` itself.
 */
export function applySettings(
  base: ConversationSettings | null,
  input: ConversationSettingsInput | null | undefined,
  param = 'conversation',
): ConversationSettings {
  const out: ConversationSettings = { ...(base ?? DEFAULT_SETTINGS) };
  if (!input) return out;
  if (has(input, 'turn_detection')) out.turn_detection = turnDetection(input.turn_detection);
  if (has(input, 'interruptions')) out.interruptions = input.interruptions ?? 'always';
  if (has(input, 'idle')) out.idle = idle(input.idle, param);
  if (has(input, 'max_duration_seconds')) out.max_duration_seconds = input.max_duration_seconds ?? null;
  return out;
}

/** An agent's setting to store, every field filled; null for none (every default). */
export function agentSettings(input: ConversationSettingsInput | null | undefined): ConversationSettings | null {
  return input ? applySettings(null, input) : null;
}

/** What a conversation runs with: the agent's setting with a call's, batch's or session's override. */
export function effectiveSettings(agent: ConversationSettings | null, override?: ConversationSettingsInput | null): ConversationSettings {
  return applySettings(agent, override);
}

/** Two overrides as one (a batch's, then its recipient's): the later's fields replace the earlier's, field by field. */
export function combinedOverride(
  first: ConversationSettingsInput | null | undefined,
  then: ConversationSettingsInput | null | undefined,
): ConversationSettingsInput | null {
  return then ? { ...first, ...then } : (first ?? null);
}

/** The maximum length of a conversation in ms: its own, within the deployment's cap (none: the cap). */
export function maxDurationMs(settings: ConversationSettings | null, capMs: number): number {
  const own = settings?.max_duration_seconds;
  return own ? Math.min(own * 1000, capMs) : capMs;
}
