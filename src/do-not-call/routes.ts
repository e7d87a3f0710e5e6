/**
 * Handlers of the do-not-call operations (thin: the rules are in service.ts). `importDoNotCallCsv`
 * checks its own form (`x-validate-in-handler`): the file part is not among the parsed fields.
 */
import fs from 'node:fs';
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import { checkContentType } from '../http/router.js';
import { multipartParts, onlyFile } from '../http/multipart.js';
import { unprocessable } from '../errors/api-error.js';
import type { DoNotCallService } from './service.js';

export function doNotCallRoutes(service: DoNotCallService): Handlers {
  return {
    listDoNotCallEntries: async (req) => ({ status: 200, body: await service.list(workspaceOf(req.auth), req.query) }),
    addDoNotCallEntry: async (req) => {
      const { entry, created } = await service.add(workspaceOf(req.auth), req.body.number);
      return created ? { status: 201, body: entry } : { status: 200, body: entry };
    },
    removeDoNotCallEntry: async (req) => {
      await service.remove(workspaceOf(req.auth), req.params.entry_id);
      return { status: 200, body: { status: 'deleted', entry_id: req.params.entry_id } };
    },
    importDoNotCallCsv: async (req) => {
      checkContentType(req.ctx);
      if (!req.ctx.is('multipart/form-data')) throw unprocessable('missing_body', 'Send multipart/form-data with the CSV in the part `file`.', 'file');
      const { fields, files } = multipartParts(req.ctx);
      const unknown = Object.keys(fields)[0];
      if (unknown !== undefined) throw unprocessable('unknown_field', `Unknown field '${unknown.slice(0, 64)}'.`, unknown.slice(0, 64));
      const file = await fs.promises.readFile(onlyFile(files, 'file', 'the CSV').filepath);
      return { status: 200, body: await service.importCsv(workspaceOf(req.auth), file) };
    },
  };
}
