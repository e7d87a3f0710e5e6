/**
 * The one place `{{name}}` placeholders are filled: an agent's instruction, first message and voicemail
 * message, for web sessions and phone calls alike, before anything reaches the voice service. A
 * placeholder's value is the conversation's own variable, else the agent's default
 * (`variable_placeholders`), else the default written in it (`{{name|there}}`). One with none of these
 * is required: calls and batches missing it are refused (`missingVariable`); where nothing can be
 * refused (an inbound call, a web session) it is filled with nothing, so braces never reach the model.
 * The pattern has no nested quantifier and no two adjacent parts that can take the same character:
 * linear time on any text.
 *
 * Filling is bounded: a text is read once into a `Template` (its plain length and how often each name
 * appears), so the filled length is a sum computed before any string is built. Each filled field is
 * held to its own cap, the `maxLength` the contract gives the field it is filled from; calls, batches
 * and inbound setup answers that would pass a cap are refused before anything is stored
 * (`fillOverflow`), and a fill is never built past its cap (`Template.fill`).
 */
import type { components } from '../../generated/openapi.js';
import { internalOpenapiDocument } from './documents.js';

/** A placeholder's value as a call or batch recipient gives it: a JSON string, number or boolean. */
export type VariableValue = components['schemas']['VariableValue'];
export type Variables = Record<string, VariableValue>;

const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*(?:\|([^{}]*))?\}\}/g;

const has = (values: Variables, name: string) => Object.prototype.hasOwnProperty.call(values, name);

/** How a value is written into the text (the contract's `VariableValue`): a string as it is, a number as `String(n)`, a boolean as `true`/`false`. */
export function renderVariable(value: VariableValue): string {
  return typeof value === 'string' ? value : String(value);
}

/** What a placeholder without a value becomes: its own default (trimmed), else nothing. */
const fallback = (written: string | undefined) => (written === undefined ? '' : written.trim());

interface Use {
  count: number;
  /** The placeholders' written length together. */
  written: number;
  /** Their length filled without a value (their own defaults) together. */
  unfilled: number;
  /** One of them has no default of its own. */
  required: boolean;
}

/** A text read for its placeholders once, so its filled length is known before it is built. */
export class Template {
  private readonly uses = new Map<string, Use>();
  /** The length of the text filled with no values at all. */
  private readonly unfilledLength: number;

  constructor(readonly text: string) {
    let length = text.length;
    for (const m of text.matchAll(PLACEHOLDER)) {
      const use = this.uses.get(m[1]) ?? { count: 0, written: 0, unfilled: 0, required: false };
      const unfilled = fallback(m[2]).length;
      use.count += 1;
      use.written += m[0].length;
      use.unfilled += unfilled;
      use.required ||= m[2] === undefined;
      this.uses.set(m[1], use);
      length += unfilled - m[0].length;
    }
    this.unfilledLength = length;
  }

  /** What `name`'s placeholders take in the filled text. */
  private room(name: string, values: Variables): number {
    const use = this.uses.get(name)!;
    return has(values, name) ? use.count * renderVariable(values[name]).length : use.unfilled;
  }

  /** The length of the text once filled with `values`, without building it: work by the values (at most a few hundred), not by the text. */
  filledLength(values: Variables): number {
    let length = this.unfilledLength;
    for (const name of Object.keys(values)) {
      const use = this.uses.get(name);
      if (use) length += this.room(name, values) - use.unfilled;
    }
    return length;
  }

  /** The first name a placeholder without a default of its own uses that `values` has no value for; null when none. */
  missing(values: Variables): string | null {
    for (const [name, use] of this.uses) if (use.required && !has(values, name)) return name;
    return null;
  }

  /** The variable of `among` whose values take the most room in the filled text; null when none of them appears. */
  largest(values: Variables, among: Iterable<string>): string | null {
    let best: string | null = null;
    let bestRoom = -1;
    for (const name of among) {
      if (!this.uses.has(name) || !has(values, name)) continue;
      const room = this.room(name, values);
      if (room > bestRoom) [best, bestRoom] = [name, room];
    }
    return best;
  }

  /** The text filled with `values`, never built past `max` characters: a fill that would pass it is cut there. */
  fill(values: Variables, max: number): string {
    if (this.uses.size === 0) return this.text;
    const valueOf = (name: string, written: string | undefined) => (has(values, name) ? renderVariable(values[name]) : fallback(written));
    if (this.filledLength(values) <= max) return this.text.replace(PLACEHOLDER, (_whole, name: string, written?: string) => valueOf(name, written));
    // Only when the checks at creation were passed by a change since (an agent edited under a waiting batch).
    let out = '';
    let from = 0;
    for (const m of this.text.matchAll(PLACEHOLDER)) {
      out += this.text.slice(from, m.index) + valueOf(m[1], m[2]);
      from = m.index + m[0].length;
      if (out.length >= max) return out.slice(0, max);
    }
    return (out + this.text.slice(from)).slice(0, max);
  }
}

/** `text` filled with `values`, held to `max` characters (see `Template.fill`). */
export function fillPlaceholders(text: string, values: Variables, max: number): string {
  return new Template(text).fill(values, max);
}

/** The variables of a conversation: the agent's defaults overridden by the call's own values. */
export function conversationVariables(defaults: Record<string, string> | null | undefined, given: Variables | null | undefined): Variables {
  return { ...(defaults ?? {}), ...(given ?? {}) };
}

/** The fields placeholders are filled in, each named as the agent's field is. */
export type FilledField = 'instruction' | 'first_message' | 'voicemail_config.message';

type Json = Record<string, any>;
let caps: Record<FilledField, number> | undefined;

/** Each filled field's cap: the `maxLength` of the agent's field the contract gives (a call's first_message has the same). */
export function filledFieldCaps(): Record<FilledField, number> {
  if (!caps) {
    const schemas = (internalOpenapiDocument() as Json).components.schemas as Json;
    caps = {
      instruction: schemas.AgentCreateRequest.properties.instruction.maxLength as number,
      first_message: schemas.AgentCreateRequest.properties.first_message.maxLength as number,
      'voicemail_config.message': schemas.VoicemailConfigInput.properties.message.maxLength as number,
    };
  }
  return caps;
}

/** A filled field over its cap, and the variable taking the most room in it. */
export interface FillOverflow {
  field: FilledField;
  /** One of the conversation's own variables when one appears in the field, else one of the agent's defaults. */
  variable: string;
  length: number;
  max: number;
}

/** The first of `templates` (each field's template, null when the field is empty) whose filled text passes its cap, or null. */
export function fillOverflow(
  templates: Partial<Record<FilledField, Template | null>>,
  defaults: Record<string, string> | null | undefined,
  given: Variables | null | undefined,
): FillOverflow | null {
  const values = conversationVariables(defaults, given);
  const capOf = filledFieldCaps();
  for (const [field, template] of Object.entries(templates) as Array<[FilledField, Template | null]>) {
    if (!template) continue;
    const length = template.filledLength(values);
    const max = capOf[field];
    if (length <= max) continue;
    const variable = template.largest(values, Object.keys(given ?? {})) ?? template.largest(values, Object.keys(values)) ?? '';
    return { field, variable, length, max };
  }
  return null;
}

/** A placeholder left without a value (see the module head), and the field it is in. */
export interface MissingVariable {
  field: FilledField;
  variable: string;
}

/** The first placeholder of `templates` that neither `given` nor the agent's `defaults` give a value and that has no default of its own; null when none. */
export function missingVariable(
  templates: Partial<Record<FilledField, Template | null>>,
  defaults: Record<string, string> | null | undefined,
  given: Variables | null | undefined,
): MissingVariable | null {
  const values = conversationVariables(defaults, given);
  for (const [field, template] of Object.entries(templates) as Array<[FilledField, Template | null]>) {
    const variable = template?.missing(values);
    if (variable) return { field, variable };
  }
  return null;
}

/** What a refusal says of a missing variable. */
export function missingMessage(m: MissingVariable): string {
  return `Variable '${m.variable}' has no value: the ${m.field} uses {{${m.variable}}}. Give it in variables, as a default in the agent's variable_placeholders, or write a default into the placeholder ({{${m.variable}|...}}).`;
}

/** What a refusal says of an overflow: the variable, the field, and the lengths. */
export function overflowMessage(o: FillOverflow): string {
  return `Variable '${o.variable}' makes the filled ${o.field} ${o.length} characters long; a filled ${o.field} may be at most ${o.max} characters.`;
}
