/**
 * Handlers of the Batches operations (thin: the rules are in service.ts). `createBatchFromCsv`
 * validates its own form (`x-validate-in-handler`): form fields arrive as text, and the file part is
 * not among the parsed fields.
 */
import fs from 'node:fs';
import type { ErrorObject } from 'ajv';
import type { File } from 'formidable';
import type { Context } from 'koa';
import type { components } from '../../generated/openapi.js';
import type { Contract } from '../http/contract.js';
import { ApiError, unprocessable, code422 } from '../errors/api-error.js';
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import { checkContentType } from '../http/router.js';
import { validationError } from '../http/validation.js';
import { findNul, refuseNul } from '../http/nul.js';
import type { Page, PageParams } from '../lib/pagination.js';
import { parseRecipientsCsv } from './csv.js';
import type { RowProblem } from './recipients.js';
import type { BatchInput, BatchService } from './service.js';
import type { CallingWindow, Weekday } from './calling-window.js';
import type { RetryOutcome } from './store.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];
type CsvForm = components['schemas']['BatchCsvUploadForm'];

const INTEGER_FIELDS = new Set(['concurrency', 'retry_max_attempts', 'retry_delay_seconds']);
const DIGITS = /^[0-9]{1,9}$/;

const list = (v: string | undefined) =>
  v === undefined
    ? undefined
    : v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);

/** `to_number` and `first_message` as the contract names them, however the file's header wrote them. */
function canonicalColumn(column: string | null): string | null {
  const lower = column?.toLowerCase();
  return lower === 'to_number' || lower === 'first_message' ? lower : column;
}

/** The form's text fields, integers as numbers (a malformed one stays text and fails validation). */
function formFields(ctx: Context): Record<string, unknown> {
  const fields = ((ctx.request as { body?: Record<string, string | string[]> }).body ?? {}) as Record<string, string | string[]>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (Array.isArray(value)) throw unprocessable('invalid_value', `Send one '${key}' field.`, key);
    out[key] = INTEGER_FIELDS.has(key) && DIGITS.test(value.trim()) ? Number(value.trim()) : value;
  }
  return out;
}

function uploadedFile(ctx: Context): File {
  const files = ((ctx.request as { files?: Record<string, File | File[]> }).files ?? {}) as Record<string, File | File[]>;
  for (const key of Object.keys(files)) if (key !== 'file') throw unprocessable('unknown_field', `Unknown file part '${key}'.`, key);
  const file = Array.isArray(files.file) ? files.file : files.file ? [files.file] : [];
  if (file.length > 1) throw unprocessable('invalid_value', "Send one file, in the part 'file'.", 'file');
  if (!file.length) throw unprocessable('missing_field', "Field 'file' is required: send the CSV as the multipart part 'file'.", 'file');
  return file[0];
}

/** The flattened form as a `BatchInput` (retry policy and calling window put back together). */
function fromForm(form: Omit<CsvForm, 'file'>, recipients: BatchInput['recipients']): BatchInput {
  const retryOn = list(form.retry_on);
  const bad = retryOn?.find((v) => !['busy', 'no_answer', 'failed'].includes(v));
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
  const badDay = days?.find((d) => !['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'].includes(d));
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

export function batchRoutes(
  batches: BatchService,
  contract: Contract,
  deliveries: (workspaceId: string, batchId: string, params: PageParams) => Promise<Page<WebhookDelivery>>,
): Handlers {
  const validateForm = contract.requestValidator('#/components/schemas/BatchCsvUploadForm');

  return {
    createBatch: async (req) => {
      const body = req.body;
      const input: BatchInput = { ...body, recipients: body.recipients.map((r, index) => ({ ...r, index })) };
      return { status: 201, body: await batches.create(workspaceOf(req.auth), input) };
    },
    createBatchFromCsv: async (req) => {
      checkContentType(req.ctx);
      if (!req.ctx.is('multipart/form-data')) throw unprocessable('missing_body', 'Send multipart/form-data with the CSV in the part `file`.', 'file');
      const fields = formFields(req.ctx);
      refuseNul({ body: fields });
      // The file part is checked below; a stand-in lets the schema check the text fields.
      if (!validateForm({ ...fields, file: '' })) {
        const errors = (validateForm.errors ?? []).map((e: ErrorObject) => ({ ...e, instancePath: `/requestBody${e.instancePath}` }));
        throw validationError(errors, { requestBody: fields });
      }
      const file = uploadedFile(req.ctx);
      const parsed = await parseRecipientsCsv(await fs.promises.readFile(file.filepath));
      if (!parsed.ok) {
        const issues = parsed.problems.map((p) => ({ loc: ['file', ...(p.column ? [p.column] : [])], msg: p.message, type: p.type }));
        throw new ApiError(422, 'invalid_request_error', code422(parsed.problems[0].type), parsed.problems[0].message, { param: 'file', issues });
      }
      // Data rows in file order, readable or not, numbered from zero.
      const rows = [...parsed.recipients.map((r) => ({ row: r.row, r })), ...parsed.problems.map((p) => ({ row: p.row, p }))].sort((a, b) => a.row - b.row);
      const recipients: BatchInput['recipients'] = [];
      const problems: RowProblem[] = [];
      rows.forEach((x, index) => {
        if (!('r' in x)) {
          problems.push({ index, ...x.p, column: canonicalColumn(x.p.column) });
          return;
        }
        const { r } = x;
        const nul = findNul({ to_number: r.to_number, first_message: r.first_message, ...r.variables }, 'row');
        if (nul !== null) {
          const column = nul.slice('row.'.length);
          problems.push({
            index,
            row: r.row,
            column,
            reason: 'invalid_value',
            message: `Row ${r.row}: '${column}' contains a NUL character (U+0000).`,
            to_number: r.to_number.includes('\0') ? null : r.to_number,
          });
          return;
        }
        recipients.push({ index, row: r.row, to_number: r.to_number, variables: r.variables, ...(r.first_message ? { first_message: r.first_message } : {}) });
      });
      const form = fields as unknown as Omit<CsvForm, 'file'>;
      return { status: 201, body: await batches.create(workspaceOf(req.auth), fromForm(form, recipients), problems) };
    },
    listBatches: async (req) => ({ status: 200, body: await batches.list(workspaceOf(req.auth), req.query) }),
    getBatch: async (req) => ({ status: 200, body: await batches.get(workspaceOf(req.auth), req.params.batch_id) }),
    cancelBatch: async (req) => ({ status: 200, body: await batches.cancel(workspaceOf(req.auth), req.params.batch_id) }),
    pauseBatch: async (req) => ({ status: 200, body: await batches.pause(workspaceOf(req.auth), req.params.batch_id) }),
    resumeBatch: async (req) => ({ status: 200, body: await batches.resume(workspaceOf(req.auth), req.params.batch_id) }),
    retryBatch: async (req) => ({ status: 200, body: await batches.retry(workspaceOf(req.auth), req.params.batch_id) }),
    listBatchWebhookDeliveries: async (req) => {
      const workspaceId = workspaceOf(req.auth);
      await batches.owned(workspaceId, req.params.batch_id);
      return { status: 200, body: await deliveries(workspaceId, req.params.batch_id, req.query) };
    },
  };
}
