/**
 * A number as the do-not-call list keeps it: E.164, separators people write removed, and a number
 * some country uses (libphonenumber's full metadata, through src/destinations), so the list holds
 * exactly the form calls and batches dial and one number is one entry however it was written.
 */
import { classifyNumber } from '../destinations/numbers.js';

const SEPARATORS = /[\s().-]/g;
const E164 = /^\+[1-9][0-9]{1,14}$/;

export type ListedNumber = { number: string } | { refusal: string };

/** The E.164 form of `raw`, or why it cannot be listed (a sentence naming it). */
export function listedNumber(raw: string): ListedNumber {
  const shown = raw.length > 64 ? `${raw.slice(0, 61)}...` : raw;
  const number = raw.replace(SEPARATORS, '');
  if (!E164.test(number)) return { refusal: `'${shown}' is not an E.164 number (a + then the country code and number).` };
  if (!classifyNumber(number).valid) return { refusal: `'${shown}' is not a phone number any country uses.` };
  return { number };
}
