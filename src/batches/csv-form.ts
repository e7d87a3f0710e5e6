/**
 * The CSV upload's form (`BatchCsvUploadForm`): its text fields as the contract types them (integers
 * as numbers, one value per field) and, once validated, as the `BatchInput` a JSON batch would send
 * (the flattened retry policy and calling window put back together).
 */
import { unprocessable } from '../errors/api-error.js';
import type { components } from '../../generated/openapi.js';
import type { BatchInput } from './batch-input.js';
import type { CallingWindow, Weekday } from './calling-window.js';
import type { RetryOutcome } from './store.js';

export type CsvForm = Omit<components['schemas']['BatchCsvUploadForm'], 'file'>;

const INTEGER_FIELDS = new Set(['agent_version', 'concurrency', 'retry_max_attempts', 'retry_delay_seconds']);
// Ten digits: 2147483647 (agent_version's maximum) is a number; a longer run stays text and fails validation.
const DIGITS = /^[0-9]{1,10}$/;
const RETRY_OUTCOMES = ['busy', 'no_answer', 'failed'];
const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

const list = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);

/** The form's text fields, integers as numbers (a malformed one stays text and fails validation). */
export function readCsvFormFields(fields: Record<string, string | string[]>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (Array.isArray(value)) throw unprocessable('invalid_value', `Send one '${key}' field.`, key);
    out[key] = INTEGER_FIELDS.has(key) && DIGITS.test(value.trim()) ? Number(value.trim()) : value;
  }
  return out;
}

/** The validated form with the file's recipients as a `BatchInput`. */
export function batchInputFromCsvForm(form: CsvForm, recipients: BatchInput['recipients']): BatchInput {
  const retryOn = list(form.retry_on);
  const bad = retryOn?.find((v) => !RETRY_OUTCOMES.includes(v));
  if (bad !== undefined) throw unprocessable('invalid_value', `'retry_on' lists '${bad.slice(0, 32)}'; use busy, no_answer, failed.`, 'retry_on');
  const windowParts = [form.calling_window_start, form.calling_window_end, form.calling_window_timezone];
  if (windowParts.some((p) => p !== undefined) && windowParts.some((p) => p === undefined)) {
    throw unprocessable(
      'invalid_calling_window',
      'Send calling_window_start, calling_window_end and calling_window_timezone together.',
      'calling_window_start',
    );
  }
  const days = list(form.calling_window_days);
  const badDay = days?.find((d) => !WEEKDAYS.includes(d));
  if (badDay !== undefined)
    throw unprocessable('invalid_value', `'calling_window_days' lists '${badDay.slice(0, 32)}'; use mon ... sun.`, 'calling_window_days');
  const window: CallingWindow | undefined =
    form.calling_window_start !== undefined
      ? {
          start: form.calling_window_start,
          end: form.calling_window_end!,
          timezone: form.calling_window_timezone!,
          ...(days ? { days: days as Weekday[] } : {}),
        }
      : undefined;
  const retry = {
    ...(form.retry_max_attempts !== undefined ? { max_attempts: form.retry_max_attempts } : {}),
    ...(form.retry_delay_seconds !== undefined ? { delay_seconds: form.retry_delay_seconds } : {}),
    ...(retryOn ? { retry_on: retryOn as RetryOutcome[] } : {}),
  };
  return {
    agent_id: form.agent_id,
    agent_version: form.agent_version,
    name: form.name,
    recipients,
    provider: form.provider,
    scheduled_at: form.scheduled_at,
    webhook_url: form.webhook_url,
    concurrency: form.concurrency,
    retry_policy: retry,
    calling_window: window,
  };
}
