/**
 * The built-in kinds of personal data a redaction setting finds in text, each as the spans
 * [start, end) it finds. Phone numbers come from libphonenumber-js (`findPhoneNumbersInText` over its
 * full metadata, leniency "valid"). The other kinds have no well-kept library that finds them in
 * running text (validator.js and the like judge a whole string, and would still need these finders),
 * so each is a bounded regular expression for candidates and the kind's own check: the Luhn sum
 * (cards, Canadian SINs), the issued ranges (US SSNs), HMRC's prefix letters (UK NI numbers), the
 * eleven test (Dutch BSNs), the check letter (Spanish DNI/NIE). Every quantifier is bounded and no two
 * alternatives overlap, so a search is linear in the text (test/unit/redaction.test.ts times a hostile
 * one).
 */
import { findPhoneNumbersInText, isSupportedCountry, type CountryCode } from 'libphonenumber-js/max';

export const ENTITIES = ['phone_number', 'email', 'card_number', 'us_ssn', 'uk_ni_number', 'ca_sin', 'nl_bsn', 'es_dni'] as const;
export type Entity = (typeof ENTITIES)[number];

export interface Span {
  start: number;
  end: number;
  kind: string;
}

const digitsOf = (s: string) => s.replace(/[^0-9]/g, '');

/** The Luhn (mod 10) check of a string of digits. */
export function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

function elevenTest(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < 8; i++) sum += (digits.charCodeAt(i) - 48) * (9 - i);
  sum -= digits.charCodeAt(8) - 48;
  return sum % 11 === 0 && digits !== '000000000';
}

const DNI_LETTERS = 'TRWAGMYFPDXBNJZSQVHLCKE';

function dniLetterOk(digits: string, letter: string): boolean {
  return DNI_LETTERS[Number(digits) % 23] === letter.toUpperCase();
}

/** Candidates by one regular expression (global), kept when `accept` says so. */
function byPattern(text: string, re: RegExp, kind: Entity, accept: (m: RegExpExecArray) => boolean): Span[] {
  const out: Span[] = [];
  re.lastIndex = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (accept(m)) out.push({ start: m.index, end: m.index + m[0].length, kind });
  }
  return out;
}

// A digit-run boundary: not inside a longer run of digits (or letters for ids with letters).
const CARD = /(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])/g;
const EMAIL = /(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9-])/g;
const SSN = /(?<![0-9])([0-9]{3})([ -]?)([0-9]{2})\2([0-9]{4})(?![0-9])/g;
const NINO = /(?<![A-Za-z0-9])([A-CEGHJ-PR-TW-Z])([A-CEGHJ-NPR-TW-Z]) ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D](?![A-Za-z0-9])/gi;
const NINO_NOT = new Set(['BG', 'GB', 'KN', 'NK', 'NT', 'TN', 'ZZ']);
const SIN = /(?<![0-9])[1-79][0-9]{2}([ -]?)[0-9]{3}\1[0-9]{3}(?![0-9])/g;
const BSN = /(?<![0-9])[0-9]{9}(?![0-9])/g;
const DNI = /(?<![A-Za-z0-9])(?:([0-9]{8})|([XYZ])[ -]?([0-9]{7}))[ -]?([A-Z])(?![A-Za-z0-9])/gi;

/** No country's valid numbers have fewer digits (Niue's and Tokelau's have four). */
const PHONE_MIN_DIGITS = 4;

function phoneNumbers(text: string, country: CountryCode | null): Span[] {
  // The library's search costs about a millisecond a sentence; most sentences hold too few digits for it.
  let digits = 0;
  for (let i = 0; i < text.length && digits < PHONE_MIN_DIGITS; i++) if (text.charCodeAt(i) >= 48 && text.charCodeAt(i) <= 57) digits++;
  if (digits < PHONE_MIN_DIGITS) return [];
  return findPhoneNumbersInText(text, country ? { defaultCountry: country } : {}).map((f) => ({
    start: f.startsAt,
    end: f.endsAt,
    kind: 'phone_number',
  }));
}

/** The spans of one built-in kind in `text`. `country`: whose national-format phone numbers count. */
export function findEntity(kind: Entity, text: string, country: CountryCode | null): Span[] {
  switch (kind) {
    case 'phone_number':
      return phoneNumbers(text, country);
    case 'email':
      return byPattern(text, EMAIL, kind, () => true);
    case 'card_number':
      return byPattern(text, CARD, kind, (m) => luhn(digitsOf(m[0])));
    case 'us_ssn':
      return byPattern(text, SSN, kind, (m) => {
        const [area, group, serial] = [m[1], m[3], m[4]];
        return area !== '000' && area !== '666' && area[0] !== '9' && group !== '00' && serial !== '0000';
      });
    case 'uk_ni_number':
      return byPattern(text, NINO, kind, (m) => !NINO_NOT.has(`${m[1]}${m[2]}`.toUpperCase()));
    case 'ca_sin':
      return byPattern(text, SIN, kind, (m) => luhn(digitsOf(m[0])));
    case 'nl_bsn':
      return byPattern(text, BSN, kind, (m) => elevenTest(m[0]));
    case 'es_dni':
      return byPattern(text, DNI, kind, (m) => (m[1] ? dniLetterOk(m[1], m[4]) : dniLetterOk(`${'XYZ'.indexOf(m[2].toUpperCase())}${m[3]}`, m[4])));
  }
}

/** A country whose numbers libphonenumber-js knows, as its type; null otherwise. */
export function phoneCountry(code: string | null | undefined): CountryCode | null {
  return code && isSupportedCountry(code) ? code : null;
}
