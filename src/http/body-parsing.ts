/**
 * Body parsing by the matched operation: none for an operation that takes no body; the large-body
 * operations get their own limits (document uploads, multipart or JSON up to 10 MB each; batch creation, JSON
 * up to 8 MB; the batch CSV upload, multipart up to 8 MB; the do-not-call import, multipart up to 2 MB); every other operation the service's default
 * parser (BODY_LIMIT_BYTES). formidable writes a file part to a temporary file; every temporary file it
 * opened is removed when the request ends, whatever happened.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Context, Middleware } from 'koa';
import type { File } from 'formidable';
import { koaBody } from 'koa-body';
import { ApiError, payloadTooLarge } from './errors.js';

/** An operation whose body may be larger than the default: its limit (multipart when the operation takes it, one file part). */
export interface LargeBody {
  maxBytes: number;
  /** Text fields a multipart body may have at most. */
  maxFields: number;
  /** The 413 message. */
  what: string;
}

const MB = 1024 * 1024;

/** Keyed by operationId: the router has already matched the request (route-match.ts). */
export const LARGE_BODIES: Readonly<Record<string, LargeBody>> = {
  uploadDocument: { maxBytes: 10 * MB, maxFields: 10, what: 'Documents may be at most 10 MB.' },
  createTextDocument: { maxBytes: 10 * MB, maxFields: 0, what: 'Documents may be at most 10 MB.' },
  createBatch: { maxBytes: 8 * MB, maxFields: 0, what: 'A batch body may be at most 8 MB.' },
  createBatchFromCsv: { maxBytes: 8 * MB, maxFields: 30, what: 'A batch CSV upload may be at most 8 MB.' },
  importDoNotCallCsv: { maxBytes: 2 * MB, maxFields: 5, what: 'A do-not-call CSV import may be at most 2 MB.' },
};

const tooLarge = (route: LargeBody, multipart: boolean) => payloadTooLarge(route.what, multipart ? 'file' : null);

/** formidable's temporary files go here (one directory per process, so leftovers are easy to see). */
export const UPLOAD_TMP_DIR = path.join(os.tmpdir(), `vas-uploads-${process.pid}`);

/** The SHA-256 of each uploaded file by part name (an idempotent request's files are part of its fingerprint). */
function fileDigests(ctx: Context): Record<string, string[]> | undefined {
  const files = (ctx.request as { files?: Record<string, File | File[]> }).files;
  if (!files) return undefined;
  return Object.fromEntries(Object.entries(files).map(([name, f]) => [name, (Array.isArray(f) ? f : [f]).map((x) => String(x.hash ?? ''))]));
}

/**
 * Parses a request's body by what its operation declares (route first: `ctx.state.operation`). An
 * operation that takes no body, or no operation at all, reads none. A large-body operation gets its own
 * limit, multipart when it declares it, and only after `isValidCredential` (an API key or a dashboard
 * session) accepts the bearer token: without one the router answers 401, and nothing (up to the
 * operation's limit) is taken in or written to disk. Every other operation gets `defaultParser`.
 */
export function parseBodyByOperation(defaultParser: Middleware, isValidCredential: (token: string) => Promise<boolean>): Middleware {
  return async (ctx, next) => {
    const info = ctx.state.operation;
    if (!info || info.requestContentTypes.length === 0) return next();
    const route = LARGE_BODIES[info.operationId];
    if (!route) return defaultParser(ctx, next);
    const multipart = info.requestContentTypes.includes('multipart/form-data');
    const token = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'))?.[1];
    if (!token || !(await isValidCredential(token))) return next();
    if (Number(ctx.get('Content-Length') || 0) > route.maxBytes + 64 * 1024) throw tooLarge(route, multipart);
    const tempFiles: string[] = [];
    await fs.promises.mkdir(UPLOAD_TMP_DIR, { recursive: true });
    const parser = koaBody({
      multipart,
      urlencoded: false,
      text: false,
      jsonLimit: route.maxBytes,
      includeUnparsed: false,
      jsonStrict: true,
      formidable: {
        uploadDir: UPLOAD_TMP_DIR,
        maxFiles: 1,
        maxFileSize: route.maxBytes,
        maxTotalFileSize: route.maxBytes,
        maxFields: route.maxFields,
        hashAlgorithm: 'sha256',
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
        if (e.code === 1006 || e.code === 1007) throw payloadTooLarge('The form fields are too many or too large.');
        if (e.httpCode === 413 || e.status === 413 || e.type === 'entity.too.large') throw tooLarge(route, multipart);
        if (e.httpCode && e.httpCode < 500)
          throw new ApiError(400, 'invalid_request_error', 'invalid_multipart', `The multipart body could not be read: ${e.message}`);
        throw err;
      },
    });
    try {
      await parser(ctx, async () => {
        ctx.state.fileDigests = fileDigests(ctx);
        await next();
      });
    } finally {
      await Promise.all(tempFiles.map((f) => fs.promises.rm(f, { force: true })));
    }
  };
}
