/**
 * Reading an uploaded CSV file with csv-parse without holding up the event loop or building records
 * no caller would accept: the file is fed in slices with a turn of the loop between them, records
 * wider than the caller allows are found on the bytes before csv-parse builds them, and file lines
 * are counted as a spreadsheet shows them. Shared by the batch upload (src/batches/csv.ts) and the
 * do-not-call import (src/do-not-call/csv.ts).
 */
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { parse, type CsvError } from 'csv-parse';

const CHUNK_BYTES = 64 * 1024;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const CR = 0x0d;
const LF = 0x0a;

/** Hands the buffer to the parser in slices, yielding to the event loop between them. */
export async function* chunks(data: Buffer): AsyncGenerator<Buffer, void, undefined> {
  for (let offset = 0; offset < data.length; offset += CHUNK_BYTES) {
    yield data.subarray(offset, offset + CHUNK_BYTES);
    await yieldToEventLoop();
  }
}

export async function feed(parser: ReturnType<typeof parse>, source: AsyncGenerator<Buffer, void, undefined>): Promise<void> {
  for await (const chunk of source) {
    if (parser.destroyed) return;
    if (!parser.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          parser.off('drain', done);
          parser.off('close', done);
          resolve();
        };
        parser.on('drain', done);
        parser.on('close', done);
      });
    }
  }
  if (!parser.destroyed) parser.end();
}

const QUOTE = 0x22;
const COMMA = 0x2c;
const SCAN_SLICE = 1024 * 1024;

/**
 * The first record with more than `maxFields` fields, by its starting line, if any. csv-parse has no
 * limit on the fields of a record (its max_record_size counts field characters, so a row of empty
 * fields passes) and builds each record whole before handing it over: a header of millions of commas
 * would become an array of millions of strings. So the delimiters are counted here first, over the
 * bytes, with the only state that matters for it (inside quotes or not: a doubled quote toggles
 * twice); a file this miscounts is malformed, which csv-parse then reports. Yields between slices.
 */
export async function firstWideRecord(data: Buffer, maxFields: number): Promise<{ line: number } | null> {
  let quoted = false;
  let fields = 1;
  let line = 1;
  let recordLine = 1;
  for (let start = 0; start < data.length; start += SCAN_SLICE) {
    const end = Math.min(data.length, start + SCAN_SLICE);
    for (let i = start; i < end; i++) {
      const byte = data[i];
      if (byte === QUOTE) quoted = !quoted;
      else if (byte === CR || (byte === LF && data[i - 1] !== CR)) {
        line++;
        if (!quoted) {
          fields = 1;
          recordLine = line;
        }
      } else if (byte === COMMA && !quoted && ++fields > maxFields) return { line: recordLine };
    }
    if (end < data.length) await yieldToEventLoop();
  }
  return null;
}

export function malformedMessage(err: CsvError, line: number): string {
  switch (err.code) {
    case 'CSV_QUOTE_NOT_CLOSED':
      return `the CSV is malformed: a quoted field in the row starting on line ${line} is never closed`;
    case 'INVALID_OPENING_QUOTE':
      return `the CSV is malformed in the row starting on line ${line}: a quote appears inside an unquoted field; wrap the field in double quotes and double every quote inside it`;
    case 'CSV_INVALID_CLOSING_QUOTE':
    case 'CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE':
      return `the CSV is malformed in the row starting on line ${line}: a closing quote is followed by other characters; double every quote inside a quoted field`;
    default:
      return `the CSV is malformed in the row starting on line ${line}: ${err.message}`;
  }
}

/**
 * Tracks file line numbers from byte offsets. csv-parse's own `info.lines` counts a CRLF inside a
 * quoted field as two lines, so lines are counted here: CRLF, LF and a lone CR each end one line.
 */
export class LineCounter {
  private offset: number;
  private line = 1;

  constructor(private readonly data: Buffer) {
    this.offset = data.subarray(0, BOM.length).equals(BOM) ? BOM.length : 0;
  }

  /** `end` is csv-parse's `info.bytes` for the record: the offset just past its record delimiter. */
  recordStartLine(end: number, record: string[]): number {
    let contentEnd = end;
    if (contentEnd > this.offset && this.data[contentEnd - 1] === LF) contentEnd--;
    if (contentEnd > this.offset && this.data[contentEnd - 1] === CR) contentEnd--;
    const lastLine = this.line + this.breaks(this.offset, contentEnd);
    this.line = lastLine + this.breaks(contentEnd, end);
    this.offset = end;
    let inside = 0;
    for (const field of record) inside += stringBreaks(field);
    return lastLine - inside;
  }

  /** The line of the first non-blank byte after the last record: where a failing record starts. */
  nextRecordLine(): number {
    let line = this.line;
    for (let i = this.offset; i < this.data.length; i++) {
      const byte = this.data[i];
      if (byte === LF) {
        if (this.data[i - 1] !== CR) line++;
      } else if (byte === CR) {
        line++;
      } else if (byte !== 0x20 && byte !== 0x09) {
        break;
      }
    }
    return line;
  }

  private breaks(from: number, to: number): number {
    let count = 0;
    for (let i = from; i < to; i++) {
      const byte = this.data[i];
      if (byte === CR || (byte === LF && this.data[i - 1] !== CR)) count++;
    }
    return count;
  }
}

function stringBreaks(value: string): number {
  let count = 0;
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code === CR || (code === LF && value.charCodeAt(i - 1) !== CR)) count++;
  }
  return count;
}

/**
 * The file's records, each with the line it starts on (counted as csv-parse produces it, so that after
 * a parse error `lines.nextRecordLine()` is current even for records produced but not yet read). The
 * file is fed in slices; a parse error comes out of the iteration; leaving the loop early stops the
 * parser and waits for the feeding to end.
 */
export async function* numberedRecords(data: Buffer, maxRecordSize: number, lines: LineCounter): AsyncGenerator<{ record: string[]; line: number }> {
  const startLines: number[] = [];
  let next = 0;
  const parser = parse({
    bom: true,
    delimiter: ',',
    relax_column_count: true,
    skip_empty_lines: true,
    trim: true,
    max_record_size: maxRecordSize,
    on_record: (record: string[], context) => {
      startLines.push(lines.recordStartLine(context.bytes, record));
      return record;
    },
  });
  // A failure while feeding surfaces through the parser, and so through the loop below.
  const feeding = feed(parser, chunks(data)).catch((err: unknown) => {
    parser.destroy(err instanceof Error ? err : new Error(String(err)));
  });
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      const line = startLines[next++];
      if (next === startLines.length) {
        startLines.length = 0;
        next = 0;
      }
      yield { record, line };
    }
  } finally {
    parser.destroy();
    await feeding;
  }
}
