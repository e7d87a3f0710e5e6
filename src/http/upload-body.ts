/**
 * The body parser of document uploads (`POST /api/v1/documents`): multipart/form-data (formidable, via
 * koa-body) and JSON, both up to 10 MB; every other route keeps the service's default parser. formidable
 * writes the file part to a temporary file; every temporary file it opened is removed when the request
 * ends, whatever happened (validation failures, 401, errors).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Middleware } from 'koa';
import { koaBody } from 'koa-body';
import { ApiError } from '../http/errors.js';
import { MAX_DOCUMENT_BYTES } from './service.js';

const tooLarge = () => new ApiError(413, 'invalid_request_error', 'payload_too_large', `Documents may be at most ${MAX_DOCUMENT_BYTES / (1024 * 1024)} MB.`, { param: 'file' });

/** formidable's temporary files go here (one directory per process, so leftovers are easy to see). */
export const UPLOAD_TMP_DIR = path.join(os.tmpdir(), `vas-uploads-${process.pid}`);

export function isDocumentUpload(method: string, path: string): boolean {
  return method === 'POST' && path.replace(/\/+$/, '') === '/api/v1/documents';
}

/**
 * Wraps the default body parser: uploads get their own, with multipart on. `isValidApiKey` runs first:
 * without a valid key the router answers 401, and nothing (up to 10 MB) is taken in or written to disk.
 */
export function documentUploadBody(defaultParser: Middleware, isValidApiKey: (token: string) => Promise<boolean>): Middleware {
  return async (ctx, next) => {
    if (!isDocumentUpload(ctx.method, ctx.path)) return defaultParser(ctx, next);
    const token = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'))?.[1];
    if (!token || !(await isValidApiKey(token))) return next();
    if (Number(ctx.get('Content-Length') || 0) > MAX_DOCUMENT_BYTES + 64 * 1024) throw tooLarge();
    const tempFiles: string[] = [];
    await fs.promises.mkdir(UPLOAD_TMP_DIR, { recursive: true });
    const parser = koaBody({
      multipart: true,
      urlencoded: false,
      text: false,
      jsonLimit: MAX_DOCUMENT_BYTES,
      includeUnparsed: false,
      jsonStrict: true,
      formidable: {
        uploadDir: UPLOAD_TMP_DIR,
        maxFiles: 1,
        maxFileSize: MAX_DOCUMENT_BYTES,
        maxTotalFileSize: MAX_DOCUMENT_BYTES,
        maxFields: 10,
        maxFieldsSize: 64 * 1024,
        allowEmptyFiles: true,
        minFileSize: 0,
        onFileBegin: (_name, file) => {
          tempFiles.push(file.filepath);
        },
      },
      onError: (err) => {
        const e = err as Error & { httpCode?: number; status?: number; type?: string; code?: unknown };
        // formidable's codes: 1015 more files than allowed, 1006/1007 too many or too large form fields.
        if (e.code === 1015) throw new ApiError(422, 'invalid_request_error', 'invalid_value', "Send exactly one file, in the part 'file'.", { param: 'file' });
        if (e.code === 1006 || e.code === 1007) throw new ApiError(413, 'invalid_request_error', 'payload_too_large', 'The form fields are too large; send only the file and an optional name.', { param: null });
        if (e.httpCode === 413 || e.status === 413 || e.type === 'entity.too.large') throw tooLarge();
        if (e.httpCode && e.httpCode < 500) throw new ApiError(400, 'invalid_request_error', 'invalid_multipart', `The multipart body could not be read: ${e.message}`);
        throw err;
      },
    });
    try {
      await parser(ctx, next);
    } finally {
      await Promise.all(tempFiles.map((f) => fs.promises.rm(f, { force: true })));
    }
  };
}
