/**
 * An agent's `redaction` setting (RedactionSettingInput in the contract) as stored and copied onto each
 * conversation, and its check on write: custom patterns compile on RE2 (re2js, linear time) within
 * their size limits, names are unique, the phone country is one libphonenumber-js knows. The contract
 * bounds the rest (counts, lengths, enums) before this runs.
 */
import { RE2JS } from 're2js';
import { unprocessable } from '../errors/api-error.js';
import { phoneCountry, type Entity } from './recognisers.js';

export type RedactionTarget = 'transcript' | 'analysis' | 'webhooks' | 'live_events' | 'recordings';

export interface RedactionSetting {
  entities: Entity[];
  custom_patterns: Array<{ name: string; pattern: string }>;
  targets: RedactionTarget[];
  phone_country: string | null;
}

/** Instructions of one pattern's compiled program, at most. */
export const PATTERN_MAX_PROGRAM = 1000;
/** Instructions of a setting's patterns together, at most (with the text's length, the work of a search). */
export const PATTERNS_MAX_PROGRAM = 2000;

/** A custom pattern compiled, or why not (the 422 it answers). */
export function compilePattern(pattern: string): RE2JS | { code: 'invalid_redaction_pattern' | 'redaction_pattern_too_complex'; message: string } {
  let re: RE2JS;
  try {
    re = RE2JS.compile(pattern);
  } catch (err) {
    return { code: 'invalid_redaction_pattern', message: `RE2 does not take this pattern: ${(err as Error).message}`.slice(0, 300) };
  }
  if (re.programSize() > PATTERN_MAX_PROGRAM)
    return { code: 'redaction_pattern_too_complex', message: `The pattern compiles to ${re.programSize()} instructions; at most ${PATTERN_MAX_PROGRAM}.` };
  if (re.matcher('').find()) return { code: 'invalid_redaction_pattern', message: 'The pattern matches the empty string.' };
  return re;
}

type Input = { entities?: Entity[]; custom_patterns?: Array<{ name: string; pattern: string }>; targets: RedactionTarget[]; phone_country?: string | null };

/** The setting to store, or 422 naming the field; null input is no setting. */
export function checkRedactionSetting(input: Input | null | undefined): RedactionSetting | null {
  if (!input) return null;
  const patterns = input.custom_patterns ?? [];
  const names = new Set<string>();
  let total = 0;
  for (const [i, p] of patterns.entries()) {
    const param = `redaction.custom_patterns[${i}]`;
    if (names.has(p.name)) throw unprocessable('redaction_pattern_name_taken', `Another custom pattern is already named '${p.name}'.`, `${param}.name`);
    names.add(p.name);
    const re = compilePattern(p.pattern);
    if (!(re instanceof RE2JS)) throw unprocessable(re.code, re.message, `${param}.pattern`);
    total += re.programSize();
    if (total > PATTERNS_MAX_PROGRAM)
      throw unprocessable(
        'redaction_pattern_too_complex',
        `The custom patterns compile to more than ${PATTERNS_MAX_PROGRAM} instructions together.`,
        `${param}.pattern`,
      );
  }
  const country = input.phone_country ?? null;
  if (country !== null && !phoneCountry(country))
    throw unprocessable('invalid_redaction_country', `libphonenumber-js knows no phone numbers of '${country}'.`, 'redaction.phone_country');
  return {
    entities: [...(input.entities ?? [])],
    custom_patterns: patterns.map(({ name, pattern }) => ({ name, pattern })),
    targets: [...input.targets],
    phone_country: country,
  };
}
