/**
 * The one place `{{name}}` placeholders are filled: an agent's instruction and first message, for web
 * sessions and phone calls alike, before anything reaches the voice service. A placeholder with no
 * value is left as written, so a missing variable is visible in the transcript rather than silently
 * blank. The pattern has no nested quantifier: linear time on any text.
 */
import type { components } from '../../generated/openapi.js';

/** A placeholder's value as a call or batch recipient gives it: a JSON string, number or boolean. */
export type VariableValue = components['schemas']['VariableValue'];
export type Variables = Record<string, VariableValue>;

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

/** How a value is written into the text (the contract's `VariableValue`): a string as it is, a number as `String(n)`, a boolean as `true`/`false`. */
export function renderVariable(value: VariableValue): string {
  return typeof value === 'string' ? value : String(value);
}

export function fillPlaceholders(text: string, values: Variables): string {
  return text.replace(PLACEHOLDER, (whole, name: string) => (Object.prototype.hasOwnProperty.call(values, name) ? renderVariable(values[name]) : whole));
}

/** The variables of a conversation: the agent's defaults overridden by the call's own values. */
export function conversationVariables(defaults: Record<string, string> | null | undefined, given: Variables | null | undefined): Variables {
  return { ...(defaults ?? {}), ...(given ?? {}) };
}
