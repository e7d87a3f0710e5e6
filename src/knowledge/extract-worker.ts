/**
 * Runs in a worker thread of the extraction pool (extractor.ts): text extraction is CPU work on a
 * tenant's file (a PDF's layout, a large HTML document), so it never runs on the service's event loop.
 * Failures come back as data (an ApiError does not cross the thread boundary).
 */
import { ApiError } from '../errors/api-error.js';
import { extract, type DocumentContentType } from './extract.js';

export interface ExtractTask {
  type: DocumentContentType;
  bytes: Uint8Array;
}

export type ExtractResult = { ok: true; text: string } | { ok: false; message: string };

export default async function run(task: ExtractTask): Promise<ExtractResult> {
  try {
    return { ok: true, text: await extract(task.type, task.bytes) };
  } catch (err) {
    if (err instanceof ApiError) return { ok: false, message: err.message };
    throw err;
  }
}
