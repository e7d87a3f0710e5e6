/**
 * The one place `{{name}}` placeholders are filled: an agent's instruction and first message, for web
 * sessions and phone calls alike, before anything reaches the voice service. A placeholder with no
 * value is left as written, so a missing variable is visible in the transcript rather than silently
 * blank. The pattern has no nested quantifier: linear time on any text.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*\}\}/g;

export function fillPlaceholders(text: string, values: Record<string, string>): string {
  return text.replace(PLACEHOLDER, (whole, name: string) => (Object.prototype.hasOwnProperty.call(values, name) ? values[name] : whole));
}

/** The variables of a conversation: the agent's defaults overridden by the call's own values. */
export function conversationVariables(
  defaults: Record<string, string> | null | undefined,
  given: Record<string, string> | null | undefined,
): Record<string, string> {
  return { ...(defaults ?? {}), ...(given ?? {}) };
}
