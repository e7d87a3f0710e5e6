/**
 * The extraction pool: documents' text is extracted in worker threads (piscina), one task at a time
 * per thread, each with a time limit; a task past its limit has its thread terminated and the upload
 * is refused (422 `document_unreadable`). The event loop that serves every tenant's requests, audio and
 * heartbeats never parses a file.
 */
import { Piscina } from 'piscina';
import { unprocessable } from '../errors/api-error.js';
import type { DocumentContentType } from './extract.js';
import type { ExtractResult, ExtractTask } from './extract-worker.js';

// tsx runs the sources (.ts); a build runs .js: the worker is the file next to this one either way.
const WORKER = new URL(`./extract-worker${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url).href;

export interface ExtractorOptions {
  threads: number;
  timeoutMs: number;
}

export class TextExtractor {
  private readonly pool: Piscina<ExtractTask, ExtractResult>;

  constructor(private readonly opts: ExtractorOptions) {
    this.pool = new Piscina({ filename: WORKER, minThreads: 0, maxThreads: opts.threads, idleTimeout: 30_000, concurrentTasksPerWorker: 1 });
  }

  async extract(type: DocumentContentType, bytes: Uint8Array): Promise<string> {
    let result: ExtractResult;
    try {
      result = await this.pool.run({ type, bytes }, { signal: AbortSignal.timeout(this.opts.timeoutMs) });
    } catch (err) {
      if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') {
        throw unprocessable(
          'document_unreadable',
          `The file took longer than ${Math.round(this.opts.timeoutMs / 1000)} s to read; split it or send its text.`,
          'file',
        );
      }
      throw err;
    }
    if (!result.ok) throw unprocessable('document_unreadable', result.message, 'file');
    return result.text;
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}
