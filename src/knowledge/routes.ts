/**
 * Handlers of the Knowledge operations. `uploadDocument` (the multipart file upload) validates its own
 * form (`x-validate-in-handler`), because openapi-backend validates only JSON bodies and the file part
 * of a multipart upload is not in the parsed fields; `createTextDocument` (its JSON form, `{name, text}`)
 * is validated by the router like every JSON body.
 */
import fs from 'node:fs';
import type { File } from 'formidable';
import type { Context } from 'koa';
import { ApiError, unprocessable } from '../errors/api-error.js';
import type { Handlers } from '../contract/handlers.js';
import { workspaceOf } from '../contract/principal.js';
import { refuseNul } from '../http/nul.js';
import { checkContentType } from '../http/router.js';
import { detectType } from './extract.js';
import type { KnowledgeService, UploadInput } from './service.js';

const FORM_FIELDS = new Set(['name']);
const FORM_FILES = new Set(['file']);

function single<T>(v: T | T[] | undefined, param: string): T | undefined {
  if (Array.isArray(v)) {
    if (v.length > 1) throw unprocessable('invalid_value', `Send one '${param}' part.`, param);
    return v[0];
  }
  return v;
}

async function fromMultipart(ctx: Context): Promise<UploadInput> {
  const fields = ((ctx.request as { body?: Record<string, string | string[]> }).body ?? {}) as Record<string, string | string[]>;
  const files = ((ctx.request as { files?: Record<string, File | File[]> }).files ?? {}) as Record<string, File | File[]>;
  for (const key of Object.keys(fields)) if (!FORM_FIELDS.has(key)) throw unprocessable('unknown_field', `Unknown field '${key}'.`, key);
  for (const key of Object.keys(files)) if (!FORM_FILES.has(key)) throw unprocessable('unknown_field', `Unknown file part '${key}'.`, key);
  const file = single(files.file, 'file');
  if (!file) throw unprocessable('missing_field', "Field 'file' is required: send the document as the multipart part 'file'.", 'file');
  refuseNul({ body: fields });
  const givenName = single(fields.name, 'name');
  if (givenName !== undefined && (givenName.length < 1 || givenName.length > 200))
    throw unprocessable('invalid_value', "'name' must be 1 to 200 characters.", 'name');
  const contentType = detectType(file.mimetype, file.originalFilename);
  if (!contentType) {
    const shown = file.mimetype && file.mimetype !== 'application/octet-stream' ? `'${file.mimetype}'` : `of the file '${file.originalFilename ?? ''}'`;
    throw new ApiError(415, 'invalid_request_error', 'unsupported_file_type', `Unsupported file type ${shown}; upload text, Markdown, HTML or PDF.`, {
      param: 'file',
    });
  }
  const name = givenName ?? (file.originalFilename?.replaceAll('\0', '').trim() || 'Untitled document').slice(0, 200);
  return { kind: 'file', name, contentType, bytes: await fs.promises.readFile(file.filepath) };
}

export function knowledgeRoutes(knowledge: KnowledgeService): Handlers {
  return {
    uploadDocument: async (req) => {
      if (req.ctx.is('application/json')) {
        throw new ApiError(
          415,
          'invalid_request_error',
          'unsupported_media_type',
          "Content-Type must be multipart/form-data with the file in the part 'file'. Text as JSON {name, text} goes to POST /api/v1/documents/text.",
        );
      }
      checkContentType(req.ctx);
      return { status: 201, body: await knowledge.upload(workspaceOf(req.auth), await fromMultipart(req.ctx)) };
    },
    createTextDocument: async (req) => ({
      status: 201,
      body: await knowledge.upload(workspaceOf(req.auth), { kind: 'text', name: req.body.name, text: req.body.text }),
    }),
    listDocuments: async (req) => ({ status: 200, body: await knowledge.list(workspaceOf(req.auth), req.query) }),
    getDocument: async (req) => ({ status: 200, body: await knowledge.get(workspaceOf(req.auth), req.params.doc_id) }),
    deleteDocument: async (req) => ({ status: 200, body: await knowledge.delete(workspaceOf(req.auth), req.params.doc_id) }),
    listAgentDocuments: async (req) => ({ status: 200, body: await knowledge.listForAgent(workspaceOf(req.auth), req.params.agent_id, req.query) }),
    attachDocument: async (req) => {
      const { document, etag } = await knowledge.attach(workspaceOf(req.auth), req.params.agent_id, req.body.doc_id, req.headers['if-match']);
      return { status: 201, body: document, headers: { ETag: etag } };
    },
    detachDocument: async (req) => {
      const { result, etag } = await knowledge.detach(workspaceOf(req.auth), req.params.agent_id, req.params.doc_id, req.headers['if-match']);
      return { status: 200, body: result, headers: { ETag: etag } };
    },
    searchAgentKnowledge: async (req) => ({
      status: 200,
      body: { object: 'list', data: await knowledge.search(workspaceOf(req.auth), req.params.agent_id, req.body.query, req.body.limit ?? 5) },
    }),
  };
}
