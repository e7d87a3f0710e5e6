/**
 * The sandbox voice service's "model": deterministic answers derived from the system instruction, the
 * declared functions and the user's turn. Rules, first match wins:
 *  1. `say exactly: "<JSON string>"` anywhere in the turn -> that text, verbatim (how a caller makes the
 *     model speak a fixed line, e.g. the agent's first message).
 *  2. "greet the user" -> `Hello! I am <role>. How can I help you today?`
 *  2a. the person asks not to be called again ("don't call me again", "do not call me again", "never call
 *     me again", "stop calling me", "take me off your list", "remove me from your list") and `opt_out`
 *     is declared -> a call of `opt_out` with no arguments; after a successful response (`result`):
 *     `I have taken your number off our list; you will not be called again. Goodbye!` (after an
 *     `error`: rule 4's sentence). Before rule 3, so "Don't call me again, bye." opts out.
 *  3. goodbye ("goodbye", "good-bye", "bye") -> `Goodbye! Thank you for talking with <role>.`, then a call of
 *     `end_conversation` when that function is declared.
 *  3a. a phone menu: the turn contains the word "press" and `send_dtmf` is declared -> a call of
 *     `send_dtmf` with `digits`: the JSON string the instruction gives after `at a phone menu press`
 *     (e.g. `At a phone menu press "2#".`: how a test makes the agent press given, even wrong, keys),
 *     else the keys the turn names after its first "press", read word by word: keys (`0`-`9`, `*`,
 *     `#`, `A`-`D`) are kept, "pound"/"hash" is `#`, "star" is `*`, "then"/"and" are skipped, and the
 *     first other word ends them ("To reach the front desk, press 1 then #." -> `1#`). After the
 *     response: rule 4's sentence.
 *  4. a declared function is asked for: the turn contains its name (case-insensitive; underscores may be
 *     spaces) -> a call of that function, arguments derived from the turn (see deriveArguments); after the
 *     response: `<name> returned: <result>`.
 *  5. "what did I say" -> `You said: "<previous user turn>".`
 *  6. otherwise -> `As <role>, I heard: "<turn>".` (text) or `As <role>, I heard <n.n> seconds of speech.` (audio)
 * A spoken turn whose audio carries a text made by encodeSpokenText (spoken-text.ts: how the sandbox
 * carrier's simulated caller speaks) is a text turn: every rule above applies to that text, and it is the
 * turn's input transcription. Any other audio is a speech turn (only rule 6 applies, and its transcription
 * is the placeholder `[speech n.ns]`).
 * A `say exactly` turn sent as clientContent while a function call is pending is an aside (a filler): it is
 * spoken as its own turn and the call stays pending. Any other user turn (or speech) cancels the call.
 * <role> is what follows "You are" in the instruction (up to the end of that sentence), else its first
 * sentence, else "your assistant".
 */

export interface DeclaredFunction {
  name: string;
  description: string;
  parameters: Record<string, unknown> | null;
}

export type UserTurn = { kind: 'text'; text: string } | { kind: 'speech'; seconds: number };

export type ModelAction =
  { kind: 'say'; text: string } | { kind: 'farewell'; text: string; endConversation: boolean } | { kind: 'call'; name: string; args: Record<string, unknown> };

export const END_CONVERSATION = 'end_conversation';
export const SEND_DTMF = 'send_dtmf';
export const OPT_OUT = 'opt_out';
export const OPT_OUT_FAREWELL = 'I have taken your number off our list; you will not be called again. Goodbye!';
const ASKS_NOT_TO_BE_CALLED = /\b(?:(?:don'?t|do not|never) call me again|stop calling me|(?:take|remove) me (?:off|from) (?:your|the) (?:calling )?list)\b/i;

const KEYPAD_KEYS = '0123456789*#ABCD';
const KEY_WORDS: Record<string, string> = { pound: '#', hash: '#', star: '*' };

/** The keys a menu prompt asks for after its first "press" (rule 3a); null when it names none. */
export function keysAfterPress(text: string): string | null {
  const words = text.split(/\s+/);
  const at = words.findIndex((w) => w.toLowerCase().replace(/[.,;:!?]+$/, '') === 'press');
  if (at < 0) return null;
  let keys = '';
  for (const raw of words.slice(at + 1)) {
    const word = raw.replace(/[.,;:!?]+$/, '');
    const lower = word.toLowerCase();
    if (lower === 'then' || lower === 'and') continue;
    if (KEY_WORDS[lower]) keys += KEY_WORDS[lower];
    else if (word && [...word].every((c) => KEYPAD_KEYS.includes(c))) keys += word;
    else break;
    if (/[.!?]$/.test(raw)) break;
  }
  return keys || null;
}

function menuKeysOf(instruction: string): string | null {
  return quotedAfter(/at a phone menu,? press\s*("(?:[^"\\]|\\.)*")/i, instruction);
}

export function roleOf(instruction: string): string {
  const youAre = /\byou are\s+([^.!?\n]+)/i.exec(instruction);
  if (youAre) return youAre[1].trim();
  const first = /^\s*([^.!?\n]{1,120})/.exec(instruction);
  return first && first[1].trim() ? first[1].trim() : 'your assistant';
}

export function speechPlaceholder(seconds: number): string {
  return `[speech ${seconds.toFixed(1)}s]`;
}

export function sayExactly(text: string): string | null {
  return quotedAfter(/say exactly[^"]*?("(?:[^"\\]|\\.)*")/i, text);
}

/** The JSON string `pattern`'s first group captured in `text`, decoded; null when absent or not a string. */
function quotedAfter(pattern: RegExp, text: string): string | null {
  const m = pattern.exec(text);
  if (!m) return null;
  try {
    const value: unknown = JSON.parse(m[1]);
    return typeof value === 'string' ? value : null;
  } catch {
    return null;
  }
}

function mentions(text: string, name: string): number {
  const spaced = name.replace(/_/g, ' ').toLowerCase();
  const lower = text.toLowerCase();
  const at = lower.indexOf(name.toLowerCase());
  return at >= 0 ? at : lower.indexOf(spaced);
}

/**
 * Arguments for a declared function from the turn: a string property gets an enum value the turn
 * mentions (else the first enum value), or the words after the function's name (else the whole turn); a
 * number/integer the first number in the turn; a boolean true. Other types are left out.
 */
export function deriveArguments(fn: DeclaredFunction, text: string): Record<string, unknown> {
  const props = (fn.parameters?.properties ?? {}) as Record<string, { type?: unknown; enum?: unknown }>;
  const at = mentions(text, fn.name);
  const after = at >= 0 ? text.slice(at + fn.name.length) : '';
  const tail = after
    .replace(/^[\s:,.!?-]*(?:(?:for|to|with|about|on|the|a|an)\s+)*/i, '')
    .replace(/[.!?]+$/, '')
    .trim();
  const number = /-?\d+(?:\.\d+)?/.exec(text);
  const args: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(props)) {
    const type = Array.isArray(schema?.type) ? schema.type[0] : schema?.type;
    if (type === 'string') {
      if (Array.isArray(schema.enum) && schema.enum.length > 0) {
        args[key] = schema.enum.find((v) => typeof v === 'string' && text.toLowerCase().includes(v.toLowerCase())) ?? schema.enum[0];
      } else {
        args[key] = tail || text.trim();
      }
    } else if ((type === 'number' || type === 'integer') && number) {
      args[key] = type === 'integer' ? Math.trunc(Number(number[0])) : Number(number[0]);
    } else if (type === 'boolean') {
      args[key] = true;
    }
  }
  return args;
}

export function decide(input: { instruction: string; functions: DeclaredFunction[]; turn: UserTurn; previousUserText: string | null }): ModelAction {
  const role = roleOf(input.instruction);
  if (input.turn.kind === 'speech') {
    return { kind: 'say', text: `As ${role}, I heard ${input.turn.seconds.toFixed(1)} seconds of speech.` };
  }
  const text = input.turn.text;
  const exact = sayExactly(text);
  if (exact !== null) return { kind: 'say', text: exact };
  if (/\bgreet the user\b/i.test(text)) return { kind: 'say', text: `Hello! I am ${role}. How can I help you today?` };
  if (ASKS_NOT_TO_BE_CALLED.test(text) && input.functions.some((f) => f.name === OPT_OUT)) return { kind: 'call', name: OPT_OUT, args: {} };
  if (/\b(good-?bye|bye)\b/i.test(text)) {
    return {
      kind: 'farewell',
      text: `Goodbye! Thank you for talking with ${role}.`,
      endConversation: input.functions.some((f) => f.name === END_CONVERSATION),
    };
  }
  if (input.functions.some((f) => f.name === SEND_DTMF) && /\bpress\b/i.test(text)) {
    const digits = menuKeysOf(input.instruction) ?? keysAfterPress(text);
    if (digits !== null) return { kind: 'call', name: SEND_DTMF, args: { digits } };
  }
  const fn = input.functions.find((f) => f.name !== END_CONVERSATION && mentions(text, f.name) >= 0);
  if (fn) return { kind: 'call', name: fn.name, args: deriveArguments(fn, text) };
  if (/\bwhat did i (just )?say\b/i.test(text)) {
    return {
      kind: 'say',
      text: input.previousUserText === null ? 'You have not said anything yet.' : `You said: "${input.previousUserText}".`,
    };
  }
  return { kind: 'say', text: `As ${role}, I heard: "${text.trim()}".` };
}

/** What the model says once a function's response arrives: rule 2a's farewell after a listed opt-out, else rule 4's sentence. */
export function afterResponse(name: string, response: unknown): string {
  const ok = response !== null && typeof response === 'object' && 'result' in response;
  return name === OPT_OUT && ok ? OPT_OUT_FAREWELL : toolResultSentence(name, response);
}

export function toolResultSentence(name: string, response: unknown): string {
  const r = response as Record<string, unknown> | null;
  const value = r && typeof r === 'object' && 'result' in r ? r.result : r && typeof r === 'object' && 'output' in r ? r.output : response;
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return `${name} returned: ${text.length > 300 ? `${text.slice(0, 297)}...` : text}`;
}
