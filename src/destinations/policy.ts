/**
 * A workspace's destination policy and the rules that apply it to a number, without the database: which
 * number kinds and countries a workspace may call, and which numbers may stand as a caller id.
 */
import { classifyNumber, type ClassifiedNumber, type NumberKind } from './numbers.js';

export interface DestinationPolicy {
  /** ISO 3166-1 alpha-2 codes; null: every country. */
  allowedCountries: string[] | null;
  allowedNumberTypes: NumberKind[];
  /** Outbound calls the workspace may place per UTC day; null: no cap. */
  dailyCallCap: number | null;
}

export type NumberRefusalCode = 'invalid_phone_number' | 'destination_type_not_allowed' | 'destination_country_not_allowed' | 'caller_id_not_allowed';

/** Why a number is refused, as data (an API error, a skipped batch recipient, a failed transfer). */
export interface NumberRefusal {
  code: NumberRefusalCode;
  message: string;
  number: string;
}

/**
 * Kinds a caller id may be whatever the policy says: a number a person can call back at an ordinary
 * rate. A premium-rate or satellite caller id invites call-back fraud ("wangiri"), and the carriers
 * refuse most of the others.
 */
export const CALLER_ID_KINDS: ReadonlySet<NumberKind> = new Set(['fixed_line', 'mobile', 'fixed_line_or_mobile', 'toll_free', 'voip', 'uan', 'fictional']);

const quoted = (raw: string) => `'${raw.slice(0, 32)}'`;
const kindWords = (kind: NumberKind) => kind.replace(/_/g, ' ');

/** Why a number may not be a caller id. */
export type CallerIdRefusal = NumberRefusal & { code: 'invalid_phone_number' | 'caller_id_not_allowed' };

function invalid(raw: string): NumberRefusal & { code: 'invalid_phone_number' } {
  return { code: 'invalid_phone_number', message: `${quoted(raw)} is not a valid phone number.`, number: raw };
}

/** Why the workspace may not call `raw`, or null when it may. */
export function destinationRefusal(policy: DestinationPolicy, raw: string): NumberRefusal | null {
  return refusalOf(policy, classifyNumber(raw), raw);
}

export function refusalOf(policy: DestinationPolicy, n: ClassifiedNumber, raw = n.e164): NumberRefusal | null {
  if (!n.valid) return invalid(raw);
  if (!policy.allowedNumberTypes.includes(n.kind)) {
    return {
      code: 'destination_type_not_allowed',
      message: `${n.e164} is a ${kindWords(n.kind)} number (${n.kind}); the workspace's destination policy does not allow calls to ${n.kind} numbers.`,
      number: raw,
    };
  }
  // Fictional numbers reach no one: only the number types govern them.
  if (policy.allowedCountries && n.kind !== 'fictional' && !(n.country && policy.allowedCountries.includes(n.country))) {
    const where = n.country ? `a number in ${n.country}` : 'a number of no country';
    return {
      code: 'destination_country_not_allowed',
      message: `${n.e164} is ${where}; the workspace's destination policy allows calls to ${policy.allowedCountries.join(', ') || 'no country'} only.`,
      number: raw,
    };
  }
  return null;
}

/** Why `raw` may not be the number a call comes from, or null when it may. */
export function callerIdRefusal(raw: string): CallerIdRefusal | null {
  const n = classifyNumber(raw);
  if (!n.valid) return invalid(raw);
  if (!CALLER_ID_KINDS.has(n.kind)) {
    return {
      code: 'caller_id_not_allowed',
      message: `${n.e164} is a ${kindWords(n.kind)} number (${n.kind}); a call can come only from a ${[...CALLER_ID_KINDS].join(', ')} number.`,
      number: raw,
    };
  }
  return null;
}
