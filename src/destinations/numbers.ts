/**
 * What kind of phone number a number is, from libphonenumber's full metadata (`libphonenumber-js/max`:
 * the per-type patterns, which the default "min" metadata leaves out, so only it can tell a premium-rate
 * number from a geographic one). The metadata is imported once with this module, when the service
 * starts; classifying a number is a parse of at most 16 characters over the loaded tables.
 *
 * Added to libphonenumber's types, because its metadata gives them no type of their own:
 * - `satellite`: the country calling codes of satellite networks (+870 Inmarsat, +881 the global mobile
 *   satellite systems: Iridium, Globalstar, Thuraya...), which it types as mobile;
 * - `international_network`: +882 and +883, numbers of carriers and services across borders, the
 *   classic destination of revenue-share fraud;
 * - `fictional`: the North American numbers set aside for fiction and tests: geographic numbers
 *   NXX-555-0100 to 0199 (a premium-rate or toll-free 555-01xx keeps its own type), and the
 *   unassignable area code 555, which libphonenumber calls invalid. They reach no one and cost
 *   nothing; the sandbox carriers' examples and this project's tests call them.
 */
import { isSupportedCountry, parsePhoneNumberFromString, type PhoneNumberType } from 'libphonenumber-js/max';

export const NUMBER_KINDS = [
  'fixed_line',
  'mobile',
  'fixed_line_or_mobile',
  'toll_free',
  'premium_rate',
  'shared_cost',
  'voip',
  'personal_number',
  'pager',
  'uan',
  'voicemail',
  'satellite',
  'international_network',
  'fictional',
  'unknown',
] as const;
export type NumberKind = (typeof NUMBER_KINDS)[number];

export type ClassifiedNumber =
  | {
      valid: true;
      e164: string;
      kind: NumberKind;
      /** ISO 3166-1 alpha-2; null for non-geographic codes (+800, +881...) and area code 555. */ country: string | null;
    }
  | { valid: false; e164: string };

const E164 = /^\+[1-9][0-9]{1,14}$/;
const SATELLITE_CODES = new Set(['870', '881']);
const NETWORK_CODES = new Set(['882', '883']);
/** NANP national numbers for fiction and tests: area code 555, and exchange 555 with lines 0100-0199. */
const NANP_AREA_555 = /^555[0-9]{7}$/;
const NANP_555_01XX = /^[2-9][0-9]{2}55501[0-9]{2}$/;
const GEOGRAPHIC: ReadonlySet<NumberKind> = new Set(['fixed_line', 'mobile', 'fixed_line_or_mobile']);

const KIND_OF: Record<PhoneNumberType, NumberKind> = {
  FIXED_LINE: 'fixed_line',
  MOBILE: 'mobile',
  FIXED_LINE_OR_MOBILE: 'fixed_line_or_mobile',
  TOLL_FREE: 'toll_free',
  PREMIUM_RATE: 'premium_rate',
  SHARED_COST: 'shared_cost',
  VOIP: 'voip',
  PERSONAL_NUMBER: 'personal_number',
  PAGER: 'pager',
  UAN: 'uan',
  VOICEMAIL: 'voicemail',
};

/** The kind and country of an E.164 number; `valid: false` when it is not E.164 or no number of its country looks like it. */
export function classifyNumber(e164: string): ClassifiedNumber {
  if (!E164.test(e164)) return { valid: false, e164 };
  const parsed = parsePhoneNumberFromString(e164);
  if (!parsed) return { valid: false, e164 };
  const code = parsed.countryCallingCode;
  const nanp = code === '1';
  if (nanp && NANP_AREA_555.test(parsed.nationalNumber)) return { valid: true, e164, kind: 'fictional', country: null };
  // With the max metadata a number is valid exactly when it has a type (libphonenumber's isValid is
  // getType() !== undefined then), so the type is computed once; isValid decides only for a plan
  // without types.
  const type = parsed.getType();
  if (!type && !parsed.isValid()) return { valid: false, e164 };
  const country = parsed.country ?? null;
  if (SATELLITE_CODES.has(code)) return { valid: true, e164, kind: 'satellite', country };
  if (NETWORK_CODES.has(code)) return { valid: true, e164, kind: 'international_network', country };
  const kind = type ? KIND_OF[type] : 'unknown';
  if (nanp && GEOGRAPHIC.has(kind) && NANP_555_01XX.test(parsed.nationalNumber)) return { valid: true, e164, kind: 'fictional', country };
  return { valid: true, e164, kind, country };
}

/** Whether `code` is an ISO 3166-1 alpha-2 code of a country or territory with a numbering plan. */
export function isDialableCountry(code: string): boolean {
  return isSupportedCountry(code);
}
