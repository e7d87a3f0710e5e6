/**
 * Parses an uploaded CSV of batch recipients: a header row naming the columns (to_number required,
 * first_message optional, every other column a template variable), then one recipient per row.
 * Problems with the file as a whole refuse it; problems with single rows are reported next to the
 * recipients that parsed. Row numbers are file lines as a spreadsheet shows them (header = row 1).
 */
import { isUtf8 } from 'node:buffer';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { CsvError, parse } from 'csv-parse';
import { findNul } from '../lib/nul.js';
import type { RecipientInput, RowProblem } from './recipients.js';

/** A data row that became a recipient: `index` is its position among the file's data rows (from 0), `row` its line. */
export type CsvRecipient = RecipientInput & { index: number; row: number; variables: Record<string, string> };

export interface CsvFileProblem {
  type: string;
  message: string;
  column: string | null;
}

/** The file's data rows in order, each a recipient or a problem (numbered together by `index`), or why the file as a whole is refused. */
export type CsvParseResult = { ok: true; recipients: CsvRecipient[]; problems: RowProblem[] } | { ok: false; problems: CsvFileProblem[] };

export interface CsvLimits {
  maxRows?: number;
  maxVariables?: number;
  maxValueLength?: number;
}

const DEFAULT_MAX_ROWS = 10_000;
const DEFAULT_MAX_VARIABLES = 100;
const DEFAULT_MAX_VALUE_LENGTH = 2000;
/** Problems a refusal lists, as the other list-shaped 422s (ValidationErrorList holds 50). */
export const MAX_FILE_PROBLEMS = 50;
const CHUNK_BYTES = 64 * 1024;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const CR = 0x0d;
const LF = 0x0a;

type Column = { kind: 'to_number' } | { kind: 'first_message' } | { kind: 'variable'; name: string };

interface Header {
  names: string[];
  columns: Column[];
  toNumberIndex: number;
}

export async function parseRecipientsCsv(data: Buffer, limits: CsvLimits = {}): Promise<CsvParseResult> {
  const maxRows = limits.maxRows ?? DEFAULT_MAX_ROWS;
  const maxVariables = limits.maxVariables ?? DEFAULT_MAX_VARIABLES;
  const maxValueLength = limits.maxValueLength ?? DEFAULT_MAX_VALUE_LENGTH;
  // to_number, first_message and the variables: no header or row may hold more fields.
  const maxFields = maxVariables + 2;
  // Every field at its longest: no readable row is longer (csv-parse counts field characters).
  const maxRecordSize = maxFields * maxValueLength;

  if (!isUtf8(data)) {
    return refuse('csv_invalid_encoding', 'the file is not valid UTF-8 text; save it as "CSV UTF-8" and upload it again');
  }
  // A record a little wider is read and its problems listed; one far wider is refused unread.
  const fieldBound = maxFields + MAX_FILE_PROBLEMS;
  const wide = await firstWideRecord(data, fieldBound);
  if (wide) {
    return refuse(
      'csv_too_many_columns',
      `${wide.line === 1 ? 'the header' : `the row starting on line ${wide.line}`} has more than ${fieldBound} fields; a file may have at most ${maxFields} columns (to_number, first_message and ${maxVariables} variables)`,
    );
  }

  const lines = new LineCounter(data);
  // Row numbers are taken as csv-parse produces each record, so that after a parse error they
  // are current even for records it had produced but this loop had not reached.
  const rowNumbers: number[] = [];
  let nextRowNumber = 0;
  const parser = parse({
    bom: true,
    delimiter: ',',
    relax_column_count: true,
    skip_empty_lines: true,
    trim: true,
    max_record_size: maxRecordSize,
    on_record: (record: string[], context) => {
      rowNumbers.push(lines.recordStartLine(context.bytes, record));
      return record;
    },
  });
  // A failure while feeding surfaces through the parser, and so through the loop below.
  const feeding = feed(parser, chunks(data)).catch((err: unknown) => {
    parser.destroy(err instanceof Error ? err : new Error(String(err)));
  });

  let header: Header | undefined;
  let dataRows = 0;
  const recipients: CsvRecipient[] = [];
  const problems: RowProblem[] = [];
  try {
    for await (const record of parser as AsyncIterable<string[]>) {
      const row = rowNumbers[nextRowNumber++];
      if (nextRowNumber === rowNumbers.length) {
        rowNumbers.length = 0;
        nextRowNumber = 0;
      }
      if (record.every((cell) => cell.trim() === '')) continue;
      if (!header) {
        const read = readHeader(record, maxVariables);
        if (!read.ok) return { ok: false, problems: read.problems };
        header = read.header;
        continue;
      }
      dataRows += 1;
      if (dataRows > maxRows) {
        return refuse('csv_too_many_rows', `the file has more than ${maxRows} recipient rows; split it into several batches`);
      }
      const result = readRow(record, dataRows - 1, row, header, maxValueLength);
      if ('reason' in result) problems.push(result);
      else recipients.push(result);
    }
  } catch (err) {
    if (err instanceof CsvError && err.code === 'CSV_MAX_RECORD_SIZE') {
      return refuse(
        'csv_record_too_large',
        `the row starting on line ${lines.nextRecordLine()} holds more than ${maxRecordSize} characters; a row may hold at most ${maxRecordSize} (${maxFields} values of ${maxValueLength})`,
      );
    }
    if (err instanceof CsvError) {
      return refuse('csv_malformed', malformedMessage(err, lines.nextRecordLine()));
    }
    throw err;
  } finally {
    parser.destroy();
    await feeding;
  }

  if (!header) {
    return refuse('csv_empty', 'the file is empty; the first row must be a header naming the columns, including to_number');
  }
  return { ok: true, recipients, problems };
}

function refuse(type: string, message: string): CsvParseResult {
  return { ok: false, problems: [{ type, message, column: null }] };
}

/** Hands the buffer to the parser in slices, yielding to the event loop between them. */
async function* chunks(data: Buffer): AsyncGenerator<Buffer, void, undefined> {
  for (let offset = 0; offset < data.length; offset += CHUNK_BYTES) {
    yield data.subarray(offset, offset + CHUNK_BYTES);
    await yieldToEventLoop();
  }
}

async function feed(parser: ReturnType<typeof parse>, source: AsyncGenerator<Buffer, void, undefined>): Promise<void> {
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

function readHeader(record: string[], maxVariables: number): { ok: true; header: Header } | { ok: false; problems: CsvFileProblem[] } {
  const problems: CsvFileProblem[] = [];
  const names = record.map((cell) => cell.trim());
  const columns: Column[] = [];
  const seen = new Set<string>();
  const reportedDuplicates = new Set<string>();
  let variables = 0;

  names.forEach((name, index) => {
    if (problems.length >= MAX_FILE_PROBLEMS) return;
    const lower = name.toLowerCase();
    let column: Column;
    if (lower === 'to_number' || lower === 'first_message') {
      column = { kind: lower };
    } else {
      column = { kind: 'variable', name };
      variables += 1;
      if (name === '') {
        problems.push({ type: 'csv_invalid_column', message: `column ${index + 1} of the header has no name`, column: name });
      } else if (!VARIABLE_NAME.test(name)) {
        problems.push({
          type: 'csv_invalid_column',
          message: `column "${name}" is not a valid variable name: use letters, digits and underscores, not starting with a digit, at most 64 characters`,
          column: name,
        });
      }
    }
    columns.push(column);

    const key = column.kind === 'variable' ? `var:${name}` : column.kind;
    if (name !== '' && seen.has(key) && !reportedDuplicates.has(key)) {
      reportedDuplicates.add(key);
      problems.push({ type: 'csv_duplicate_column', message: `column "${name}" appears more than once in the header`, column: name });
    }
    seen.add(key);
  });

  const toNumberIndex = columns.findIndex((c) => c.kind === 'to_number');
  if (toNumberIndex === -1) {
    problems.push({ type: 'csv_missing_column', message: 'the header has no to_number column', column: 'to_number' });
  }
  if (variables > maxVariables) {
    problems.push({
      type: 'csv_too_many_columns',
      message: `the header has ${variables} variable columns; at most ${maxVariables} are allowed`,
      column: null,
    });
  }
  if (problems.length > 0) return { ok: false, problems: problems.slice(0, MAX_FILE_PROBLEMS) };
  return { ok: true, header: { names, columns, toNumberIndex } };
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
async function firstWideRecord(data: Buffer, maxFields: number): Promise<{ line: number } | null> {
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

/** A column as the contract names it: `to_number` and `first_message` however the header wrote them. */
const columnName = (column: Column, name: string) => (column.kind === 'variable' ? name : column.kind);

function readRow(record: string[], index: number, row: number, header: Header, maxValueLength: number): CsvRecipient | RowProblem {
  const toNumber = (record[header.toNumberIndex] ?? '').trim();
  const toNumberOrNull = toNumber === '' || toNumber.includes('\0') ? null : toNumber;
  const problem = (column: string | null, reason: RowProblem['reason'], message: string): RowProblem => ({
    index,
    row,
    column,
    reason,
    message,
    to_number: toNumberOrNull,
  });

  if (record.length !== header.columns.length) {
    return problem(null, 'invalid_row', `row ${row} has ${record.length} fields; the header has ${header.columns.length}`);
  }

  const recipient: CsvRecipient = { index, row, to_number: toNumber, variables: {} };
  for (let i = 0; i < record.length; i++) {
    const value = record[i].trim();
    const column = header.columns[i];
    const name = columnName(column, header.names[i]);
    if (column.kind === 'to_number' && value === '') return { ...problem(name, 'invalid_value', `row ${row} has no to_number`), to_number: null };
    if (exceedsLength(value, maxValueLength)) {
      return problem(name, 'invalid_value', `row ${row}: the value of ${name} is longer than ${maxValueLength} characters`);
    }
    if (value === '') continue;
    if (column.kind === 'first_message') recipient.first_message = value;
    else if (column.kind === 'variable') recipient.variables[column.name] = value;
  }
  // PostgreSQL cannot store a NUL: the row is skipped, naming the cell.
  const nul = findNul({ to_number: recipient.to_number, first_message: recipient.first_message, ...recipient.variables }, 'row');
  if (nul !== null) {
    const column = nul.slice('row.'.length);
    return problem(column, 'invalid_value', `Row ${row}: '${column}' contains a NUL character (U+0000).`);
  }
  return recipient;
}

/** Length in Unicode characters (code points), counted only when the UTF-16 length says it may matter. */
function exceedsLength(value: string, max: number): boolean {
  if (value.length <= max) return false;
  let count = 0;
  for (const _ of value) {
    if (++count > max) return true;
  }
  return false;
}

function malformedMessage(err: CsvError, line: number): string {
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
class LineCounter {
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
