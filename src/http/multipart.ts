/** The parts of a multipart body as koa-body (formidable) left them, for the upload operations that check their own form. */
import type { File } from 'formidable';
import type { Context } from 'koa';
import { unprocessable } from '../errors/api-error.js';

/** The form's text fields and file parts. */
export function multipartParts(ctx: Context): { fields: Record<string, string | string[]>; files: Record<string, File | File[]> } {
  const request = ctx.request as { body?: Record<string, string | string[]>; files?: Record<string, File | File[]> };
  return { fields: request.body ?? {}, files: request.files ?? {} };
}

/** The one file part named `name` (422 for another file part, two of them, or none). */
export function onlyFile(files: Record<string, File | File[]>, name: string, what: string): File {
  for (const key of Object.keys(files)) if (key !== name) throw unprocessable('unknown_field', `Unknown file part '${key}'.`, key);
  const file = Array.isArray(files[name]) ? files[name] : files[name] ? [files[name]] : [];
  if (file.length > 1) throw unprocessable('invalid_value', `Send one file, in the part '${name}'.`, name);
  if (!file.length) throw unprocessable('missing_field', `Field '${name}' is required: send ${what} as the multipart part '${name}'.`, name);
  return file[0];
}
