/**
 * Parses an uploaded CSV of batch recipients: a header row naming the columns (to_number required,
 * first_message optional, `conversation.` columns for the row's conversation settings (csv-conversation.ts),
 * every other column a template variable), then one recipient per row.
 * Problems with the file as a whole refuse it; problems with single rows are reported next to the
 * recipients that parsed. Row numbers are file lines as a spreadsheet shows them (header = row 1).
 */
import { isUtf8 } from 'node:buffer';
import { CsvError } from 'csv-parse';
import { firstWideRecord, LineCounter, malformedMessage, numberedRecords } from '../lib/csv-records.js';
import { findNul } from '../lib/nul.js';
import type { RecipientInput, RowProblem } from './recipients.js';
import { CONVERSATION_COLUMNS, CONVERSATION_PREFIX, conversationPath, rowOverride, type ConversationPath } from './csv-conversation.js';

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
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

type Column = { kind: 'to_number' } | { kind: 'first_message' } | { kind: 'variable'; name: string } | { kind: 'conversation'; path: ConversationPath };

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
  let header: Header | undefined;
  let dataRows = 0;
  const recipients: CsvRecipient[] = [];
  const problems: RowProblem[] = [];
  try {
    for await (const { record, line: row } of numberedRecords(data, maxRecordSize, lines)) {
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
  }

  if (!header) {
    return refuse('csv_empty', 'the file is empty; the first row must be a header naming the columns, including to_number');
  }
  return { ok: true, recipients, problems };
}

function refuse(type: string, message: string): CsvParseResult {
  return { ok: false, problems: [{ type, message, column: null }] };
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
    const path = conversationPath(name);
    if (lower === 'to_number' || lower === 'first_message') {
      column = { kind: lower };
    } else if (path) {
      // Counted with the variables: the file's limits stay as the contract states them.
      column = { kind: 'conversation', path };
      variables += 1;
    } else if (name.startsWith(CONVERSATION_PREFIX)) {
      column = { kind: 'variable', name };
      variables += 1;
      problems.push({
        type: 'csv_invalid_column',
        message: `column "${name.slice(0, 64)}" is not a conversation setting; use one of ${CONVERSATION_COLUMNS.map((c) => CONVERSATION_PREFIX + c).join(', ')}`,
        column: name,
      });
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

    const key = column.kind === 'variable' ? `var:${name}` : column.kind === 'conversation' ? name : column.kind;
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

/** A column as the contract names it: `to_number` and `first_message` however the header wrote them. */
const columnName = (column: Column, name: string) => (column.kind === 'variable' || column.kind === 'conversation' ? name : column.kind);

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
  const conversation: Partial<Record<ConversationPath, string>> = {};
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
    else if (column.kind === 'conversation') conversation[column.path] = value;
  }
  // PostgreSQL cannot store a NUL: the row is skipped, naming the cell.
  const conversationCells = Object.fromEntries(Object.entries(conversation).map(([path, v]) => [CONVERSATION_PREFIX + path, v]));
  const nul = findNul({ to_number: recipient.to_number, first_message: recipient.first_message, ...recipient.variables, ...conversationCells }, 'row');
  if (nul !== null) {
    const column = nul.slice('row.'.length);
    return problem(column, 'invalid_value', `Row ${row}: '${column}' contains a NUL character (U+0000).`);
  }
  const override = rowOverride(conversation);
  if (override) recipient.conversation = override;
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
