/**
 * Handlers of the Batches operations (thin: the rules are in service.ts). `createBatchFromCsv`
 * validates its own form (`x-validate-in-handler`): form fields arrive as text, and the file part is
 * not among the parsed fields.
 */
import fs from 'node:fs';
import type { components } from '../../generated/openapi.js';
import type { Contract } from '../http/contract.js';
import { unprocessable } from '../errors/api-error.js';
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import { checkContentType } from '../http/router.js';
import { multipartParts, onlyFile } from '../http/multipart.js';
import { bodyValidationError } from '../http/validation.js';
import { refuseNul } from '../http/nul.js';
import type { Page, PageParams } from '../lib/pagination.js';
import { readCsvFormFields, type CsvForm } from './csv-form.js';
import type { BatchService } from './service.js';
import type { BatchInput } from './batch-input.js';

type WebhookDelivery = components['schemas']['WebhookDelivery'];

export function batchRoutes(
  batches: BatchService,
  contract: Contract,
  deliveries: (workspaceId: string, batchId: string, params: PageParams) => Promise<Page<WebhookDelivery>>,
): Handlers {
  const validateForm = contract.requestValidator('#/components/schemas/BatchCsvUploadForm');
  const validateConversation = contract.requestValidator('#/components/schemas/ConversationSettingsInput');
  // A CSV row's override, refused with the problems the JSON body's `conversation` would have.
  const checkOverride = (override: unknown) =>
    validateConversation(override)
      ? null
      : bodyValidationError(
          (validateConversation.errors ?? []).map((e) => ({ ...e, instancePath: `/conversation${e.instancePath}` })),
          { conversation: override },
        );

  return {
    createBatch: async (req) => {
      const body = req.body;
      const input: BatchInput = { ...body, recipients: body.recipients.map((r, index) => ({ ...r, index })) };
      return { status: 201, body: await batches.create(workspaceOf(req.auth), input) };
    },
    createBatchFromCsv: async (req) => {
      checkContentType(req.ctx);
      if (!req.ctx.is('multipart/form-data')) throw unprocessable('missing_body', 'Send multipart/form-data with the CSV in the part `file`.', 'file');
      const { fields, files } = multipartParts(req.ctx);
      const form = readCsvFormFields(fields);
      refuseNul({ body: form });
      // The file part is checked below; a stand-in lets the schema check the text fields.
      if (!validateForm({ ...form, file: '' })) throw bodyValidationError(validateForm.errors ?? [], form);
      const file = await fs.promises.readFile(onlyFile(files, 'file', 'the CSV').filepath);
      return { status: 201, body: await batches.createFromCsv(workspaceOf(req.auth), form as CsvForm, file, checkOverride) };
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
