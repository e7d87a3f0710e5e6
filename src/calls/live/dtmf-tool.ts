/**
 * The built-in `send_dtmf` tool of phone calls, as the model sees it: press keys on the phone keypad
 * (to get through a phone menu, enter an extension or a PIN), and the checking of its arguments.
 * `digits` holds keys `0`-`9`, `*`, `#`, `A`-`D` and pauses `w` (0.5 s) and `W` (1 s), at most
 * MAX_DTMF_CHARACTERS of them and at least one key; anything else is refused with an error the model
 * can act on, and nothing is sent.
 */
import type { ToolDeclaration } from '../../voice/types.js';

export const SEND_DTMF_TOOL = 'send_dtmf';
/** Longest `digits` (keys and pauses): the longest keypad entry of the transcript. */
export const MAX_DTMF_CHARACTERS = 64;
const ALLOWED = '0123456789*#ABCDwW';

export const sendDtmfDeclaration: ToolDeclaration = {
  name: SEND_DTMF_TOOL,
  description:
    'Presses keys on the phone keypad (DTMF tones), to choose an option of an automated phone menu or enter an extension or PIN. ' +
    'Use it when a recorded menu asks you to press keys; the keys are heard by the other side, not spoken.',
  parameters: {
    type: 'object',
    properties: {
      digits: {
        type: 'string',
        description: `The keys in order: 0-9, *, #, A-D; w waits 0.5 s and W 1 s between keys (e.g. "1w#"). At most ${MAX_DTMF_CHARACTERS} characters.`,
      },
    },
    required: ['digits'],
  },
};

/** The keys a call of the tool asks for, or why they cannot be sent. */
export function dtmfArguments(args: Record<string, unknown>): { keys: string } | { error: string } {
  const digits = args.digits;
  if (typeof digits !== 'string' || digits.length === 0) {
    return { error: 'Pass the keys to press as `digits`, a string such as "1#".' };
  }
  if (digits.length > MAX_DTMF_CHARACTERS) {
    return { error: `Too many keys: at most ${MAX_DTMF_CHARACTERS} characters (keys and pauses) at once; nothing was pressed.` };
  }
  for (let i = 0; i < digits.length; i++) {
    if (!ALLOWED.includes(digits[i])) {
      return {
        error: `'${digits[i]}' at position ${i + 1} is not a key: use only 0-9, *, #, A-D, and w or W for a pause. Nothing was pressed.`,
      };
    }
  }
  if (!/[^wW]/.test(digits)) return { error: 'Only pauses were given: include at least one key to press. Nothing was pressed.' };
  return { keys: digits };
}
