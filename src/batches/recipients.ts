/**
 * Screening a batch's recipients before anything is stored: numbers are normalized to E.164, and a
 * recipient whose number is invalid, refused by the workspace's destination policy, on its
 * do-not-call list or already listed earlier in the batch is skipped with a reason instead of failing
 * the batch. CSV rows that could not be read arrive here
 * as problems and are skipped the same way.
 */
import type { NumberRefusal } from '../destinations/policy.js';
import type { Variables } from '../contract/placeholders.js';
import type { SkippedItem } from './store.js';
import type { ConversationSettingsInput } from '../voice/conversation-settings.js';

export interface RecipientInput {
  to_number: string;
  variables?: Variables;
  first_message?: string;
  timezone?: string;
  /** Overrides the batch's conversation settings for this recipient's calls. */
  conversation?: ConversationSettingsInput | null;
  /** The CSV line the row starts on. */
  row?: number;
}

export interface AcceptedRecipient extends RecipientInput {
  number: string;
}

/** A CSV row that could not become a recipient. */
export interface RowProblem {
  index: number;
  row: number;
  column: string | null;
  reason: 'invalid_row' | 'invalid_value';
  message: string;
  to_number: string | null;
}

const E164 = /^\+[1-9][0-9]{1,14}$/;
const SEPARATORS = /[\s().-]/g;

/** The E.164 form of a number as people write it (`+1 (415) 555-0123`), or null. */
export function normalizeNumber(raw: string): string | null {
  const n = raw.replace(SEPARATORS, '');
  return E164.test(n) ? n : null;
}

/** The E.164 numbers among `inputs` (what the destination policy screens). */
export function* numbersOf(inputs: Iterable<RecipientInput>): Generator<string> {
  for (const r of inputs) {
    const number = normalizeNumber(r.to_number);
    if (number) yield number;
  }
}

const where = (i: number, row: number | undefined) => (row === undefined ? `Recipient ${i}` : `Row ${row}`);

/**
 * Keeps recipients in order; `index` of a skipped item is its position among `inputs` merged with
 * `problems` (the request's recipients, or the file's data rows).
 */
export function screenRecipients(
  inputs: Array<RecipientInput & { index: number }>,
  problems: RowProblem[] = [],
  /** The destination policy's check of an E.164 number (src/destinations). */
  screen: (number: string) => NumberRefusal | null = () => null,
  /** The numbers on the workspace's do-not-call list (src/do-not-call). */
  doNotCall: ReadonlySet<string> = new Set(),
): { accepted: AcceptedRecipient[]; skipped: SkippedItem[] } {
  const accepted: AcceptedRecipient[] = [];
  const skipped: SkippedItem[] = problems.map((p) => ({
    index: p.index,
    row: p.row,
    column: p.column,
    to_number: p.to_number,
    reason: p.reason,
    message: p.message,
  }));
  const seen = new Set<string>();
  for (const r of inputs) {
    const number = normalizeNumber(r.to_number);
    const base = { index: r.index, row: r.row ?? null, column: 'to_number', to_number: r.to_number };
    const refused = number ? screen(number) : null;
    if (!number) {
      skipped.push({ ...base, reason: 'invalid_number', message: `${where(r.index, r.row)}: '${r.to_number.slice(0, 64)}' is not an E.164 number.` });
    } else if (refused) {
      const reason = refused.code === 'destination_type_not_allowed' || refused.code === 'destination_country_not_allowed' ? refused.code : 'invalid_number';
      skipped.push({ ...base, reason, message: `${where(r.index, r.row)}: ${refused.message}` });
    } else if (doNotCall.has(number)) {
      skipped.push({ ...base, reason: 'do_not_call', message: `${where(r.index, r.row)}: ${number} is on the workspace's do-not-call list.` });
    } else if (seen.has(number)) {
      skipped.push({ ...base, reason: 'duplicate', message: `${where(r.index, r.row)}: ${number} appears earlier in the list.` });
    } else {
      seen.add(number);
      accepted.push({ ...r, number });
    }
  }
  skipped.sort((a, b) => a.index - b.index);
  return { accepted, skipped };
}
