/**
 * Reads a do-not-call import: a header row with a `number` column (any case; other columns are
 * ignored), then one number a row. Problems with the file as a whole refuse it; a row that lists
 * nothing (wrong number of fields, an empty or invalid number) is reported with its line beside the
 * numbers that were read. Row numbers are file lines as a spreadsheet shows them (header = row 1).
 */
import { isUtf8 } from 'node:buffer';
import { setImmediate as yieldToEventLoop } from 'node:timers/promises';
import { CsvError } from 'csv-parse';
import { firstWideRecord, LineCounter, malformedMessage, numberedRecords } from '../lib/csv-records.js';
import { listedNumber } from './numbers.js';

export const MAX_IMPORT_ROWS = 100_000;
export const MAX_IMPORT_COLUMNS = 20;
/** Characters a row may hold (csv-parse counts field characters): 20 columns of about 200. */
export const MAX_IMPORT_RECORD = 4096;

export interface SkippedRow {
  row: number;
  number: string | null;
  reason: 'invalid_number' | 'invalid_row';
  message: string;
}

export interface ImportFileProblem {
  type: string;
  message: string;
}

export type ImportParse = { ok: true; rows: number; numbers: string[]; skipped: SkippedRow[] } | { ok: false; problem: ImportFileProblem };

/** Numbers classified between two turns of the event loop (a classification takes tens of microseconds: about 10 ms a slice). */
const CLASSIFY_SLICE = 200;

const refuse = (type: string, message: string): ImportParse => ({ ok: false, problem: { type, message } });
const shownCell = (cell: string) => (cell === '' || cell.includes('\0') ? null : cell.slice(0, 64));

/** The file's numbers in file order (E.164, repeats kept: the import counts them), and its skipped rows. */
export async function parseImportCsv(data: Buffer): Promise<ImportParse> {
  if (!isUtf8(data)) return refuse('csv_invalid_encoding', 'the file is not valid UTF-8 text; save it as "CSV UTF-8" and upload it again');
  const wide = await firstWideRecord(data, MAX_IMPORT_COLUMNS);
  if (wide) {
    const where = wide.line === 1 ? 'the header' : `the row starting on line ${wide.line}`;
    return refuse(
      'csv_too_many_columns',
      `${where} has more than ${MAX_IMPORT_COLUMNS} fields; a do-not-call file may have at most ${MAX_IMPORT_COLUMNS} columns`,
    );
  }
  const lines = new LineCounter(data);
  let columns = -1;
  let numberAt = -1;
  const numbers: string[] = [];
  const skipped: SkippedRow[] = [];
  let rows = 0;
  try {
    for await (const { record, line: row } of numberedRecords(data, MAX_IMPORT_RECORD, lines)) {
      if (record.every((cell) => cell === '')) continue;
      if (columns < 0) {
        columns = record.length;
        numberAt = record.findIndex((name) => name.toLowerCase() === 'number');
        if (numberAt < 0) return refuse('csv_missing_column', 'the header has no number column');
        continue;
      }
      if (++rows > MAX_IMPORT_ROWS) return refuse('csv_too_many_rows', `the file has more than ${MAX_IMPORT_ROWS} rows; split it into several files`);
      const cell = record[numberAt] ?? '';
      if (record.length !== columns) {
        skipped.push({ row, number: shownCell(cell), reason: 'invalid_row', message: `Row ${row} has ${record.length} fields; the header has ${columns}.` });
        continue;
      }
      if (rows % CLASSIFY_SLICE === 0) await yieldToEventLoop();
      const read = cell === '' ? { refusal: 'no number.' } : listedNumber(cell);
      if ('refusal' in read) skipped.push({ row, number: shownCell(cell), reason: 'invalid_number', message: `Row ${row}: ${read.refusal}` });
      else numbers.push(read.number);
    }
  } catch (err) {
    if (err instanceof CsvError && err.code === 'CSV_MAX_RECORD_SIZE') {
      return refuse('csv_record_too_large', `the row starting on line ${lines.nextRecordLine()} holds more than ${MAX_IMPORT_RECORD} characters`);
    }
    if (err instanceof CsvError) return refuse('csv_malformed', malformedMessage(err, lines.nextRecordLine()));
    throw err;
  }
  if (columns < 0) return refuse('csv_empty', 'the file is empty; the first row must be a header with a number column');
  return { ok: true, rows, numbers, skipped };
}
