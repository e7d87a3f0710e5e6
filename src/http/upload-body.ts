/**
 * The body parsers of the routes that take large bodies: document uploads (`POST /api/v1/documents`,
 * multipart or JSON up to 10 MB), batch creation (`POST /api/v1/batches`, JSON up to 8 MB) and the
 * batch CSV upload (`POST /api/v1/batches/csv`, multipart up to 8 MB). Every other route keeps the
 * service's default parser (BODY_LIMIT_BYTES). formidable writes a file part to a temporary file;
 * every temporary file it opened is removed when the request ends, whatever happened.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Context, Middleware } from 'koa';
import type { File } from 'formidable';
import { koaBody } from 'koa-body';
import { ApiError, payloadTooLarge } from './errors.js';

/** A route with a body larger than the default: its limit, and whether it takes multipart (one file part). */
export interface LargeBodyRoute {
  method: string;
  path: string;
  maxBytes: number;
  multipart: boolean;
  /** Text fields a multipart body may have at most. */
  maxFields: number;
  /** The 413 message. */
  what: string;
}

const MB = 1024 * 1024;

export const LARGE_BODY_ROUTES: LargeBodyRoute[] = [
  { method: 'POST', path: '/api/v1/documents', maxBytes: 10 * MB, multipart: true, maxFields: 10, what: 'Documents may be at most 10 MB.' },
  { method: 'POST', path: '/api/v1/batches', maxBytes: 8 * MB, multipart: false, maxFields: 0, what: 'A batch body may be at most 8 MB.' },
  { method: 'POST', path: '/api/v1/batches/csv', maxBytes: 8 * MB, multipart: true, maxFields: 30, what: 'A batch CSV upload may be at most 8 MB.' },
];

const tooLarge = (route: LargeBodyRoute) => payloadTooLarge(route.what, route.multipart ? 'file' : null);

/** formidable's temporary files go here (one directory per process, so leftovers are easy to see). */
export const UPLOAD_TMP_DIR = path.join(os.tmpdir(), `vas-uploads-${process.pid}`);

/** The SHA-256 of each uploaded file by part name (an idempotent request's files are part of its fingerprint). */
function fileDigests(ctx: Context): Record<string, string[]> | undefined {
  const files = (ctx.request as { files?: Record<string, File | File[]> }).files;
  if (!files) return undefined;
  return Object.fromEntries(Object.entries(files).map(([name, f]) => [name, (Array.isArray(f) ? f : [f]).map((x) => String(x.hash ?? ''))]));
}

function largeBodyRoute(method: string, path: string): LargeBodyRoute | undefined {
  const p = path.replace(/\/+$/, '');
  return LARGE_BODY_ROUTES.find((r) => r.method === method && r.path === p);
}

/**
 * Wraps the default body parser: large-body routes get their own. `isValidCredential` (an API key or a
 * dashboard session) runs first: without one the router answers 401, and nothing (up to the route's
 * limit) is taken in or written to disk.
 */
export function largeBodies(defaultParser: Middleware, isValidCredential: (token: string) => Promise<boolean>): Middleware {
  return async (ctx, next) => {
    const route = largeBodyRoute(ctx.method, ctx.path);
    if (!route) return defaultParser(ctx, next);
    const token = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('Authorization'))?.[1];
    if (!token || !(await isValidCredential(token))) return next();
    if (Number(ctx.get('Content-Length') || 0) > route.maxBytes + 64 * 1024) throw tooLarge(route);
    const tempFiles: string[] = [];
    await fs.promises.mkdir(UPLOAD_TMP_DIR, { recursive: true });
    const parser = koaBody({
      multipart: route.multipart,
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
        if (e.httpCode === 413 || e.status === 413 || e.type === 'entity.too.large') throw tooLarge(route);
        if (e.httpCode && e.httpCode < 500) throw new ApiError(400, 'invalid_request_error', 'invalid_multipart', `The multipart body could not be read: ${e.message}`);
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
