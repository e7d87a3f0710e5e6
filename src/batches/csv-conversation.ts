/**
 * A CSV row's override of the conversation settings: `conversation.<path>` columns, one per field of
 * `ConversationSettingsInput` (the column list and the cell rules are in the contract's
 * `createBatchFromCsv`). Cells are read into the object a JSON recipient would send, which is then
 * checked as the JSON body is (the contract's schema, then the rule it cannot say), each problem
 * named by its row and column.
 */
import { ApiError, code422, type ValidationIssue } from '../errors/api-error.js';
import { applySettings, type ConversationSettingsInput } from '../voice/conversation-settings.js';

export const CONVERSATION_PREFIX = 'conversation.';

/** Every column, as the field's path under `conversation`. */
export const CONVERSATION_COLUMNS = [
  'interruptions',
  'max_duration_seconds',
  'turn_detection.start_sensitivity',
  'turn_detection.end_sensitivity',
  'turn_detection.silence_ms',
  'turn_detection.prefix_padding_ms',
  'idle.idle_ms',
  'idle.reminders',
  'idle.max_reminders',
  'idle.goodbye_message',
] as const;
export type ConversationPath = (typeof CONVERSATION_COLUMNS)[number];

const INTEGER_FIELDS = new Set<ConversationPath>([
  'max_duration_seconds',
  'turn_detection.silence_ms',
  'turn_detection.prefix_padding_ms',
  'idle.idle_ms',
  'idle.max_reminders',
]);
const INTEGER = /^-?[0-9]{1,9}$/;
const REMINDER_SEPARATOR = '|';

/** The field a header's column sets, or null when `name` is no conversation column. */
export function conversationPath(name: string): ConversationPath | null {
  if (!name.startsWith(CONVERSATION_PREFIX)) return null;
  const path = name.slice(CONVERSATION_PREFIX.length);
  return (CONVERSATION_COLUMNS as readonly string[]).includes(path) ? (path as ConversationPath) : null;
}

function cellValue(path: ConversationPath, cell: string): unknown {
  if (cell === 'null') return null;
  if (INTEGER_FIELDS.has(path) && INTEGER.test(cell)) return Number(cell);
  if (path === 'idle.reminders')
    return cell
      .split(REMINDER_SEPARATOR)
      .map((s) => s.trim())
      .filter(Boolean);
  return cell;
}

/**
 * The row's override from its non-empty conversation cells, or undefined when it has none. A group's
 * cells (`turn_detection`, `idle`) make one object; `null` in `idle.idle_ms` alone is `idle: null`.
 */
export function rowOverride(cells: Partial<Record<ConversationPath, string>>): ConversationSettingsInput | undefined {
  const entries = Object.entries(cells) as Array<[ConversationPath, string]>;
  if (!entries.length) return undefined;
  const out: Record<string, unknown> = {};
  for (const [path, cell] of entries) {
    const [group, field] = path.split('.');
    if (field === undefined) out[group] = cellValue(path, cell);
    else ((out[group] ??= {}) as Record<string, unknown>)[field] = cellValue(path, cell);
  }
  const idle = out.idle as Record<string, unknown> | undefined;
  if (idle && idle.idle_ms === null && Object.keys(idle).length === 1) out.idle = null;
  return out as ConversationSettingsInput;
}

interface RowWithOverride {
  row?: number;
  conversation?: ConversationSettingsInput | null;
}

/** The column a problem at `field` (under `conversation`) belongs to: a reminder's index is its list's. */
function columnOf(field: string[]): string {
  const path = field.slice(0, 2).join('.');
  return CONVERSATION_PREFIX + ((CONVERSATION_COLUMNS as readonly string[]).includes(path) ? path : field[0]);
}

const MAX_ISSUES = 50;

/** The contract's refusal of an override, as the JSON body's `conversation` (the route's request validation); null when it passes. */
export type OverrideSchemaCheck = (override: ConversationSettingsInput) => ApiError<422> | null;

/**
 * 422 when a row's override is one the JSON body would refuse: the JSON path's code for the first
 * problem, `param` `file.<row>.<column>`, one issue per problem (the first 50).
 */
export function checkRowOverrides(rows: RowWithOverride[], schemaCheck: OverrideSchemaCheck): void {
  const issues: ValidationIssue[] = [];
  let first: { code: string; param: string; message: string } | undefined;
  for (const r of rows) {
    if (!r.conversation || r.row === undefined || issues.length >= MAX_ISSUES) continue;
    const row = String(r.row);
    let rowIssues: ValidationIssue[];
    let code: string;
    const err = schemaCheck(r.conversation);
    if (err) {
      code = err.code;
      rowIssues = err.issues.map((i) => ({ ...i, loc: ['file', row, columnOf(i.loc.slice(2))], msg: `Row ${row}: ${i.msg}` }));
    } else {
      try {
        applySettings(null, r.conversation);
        continue;
      } catch (e) {
        if (!(e instanceof ApiError) || e.param === null) throw e;
        code = e.code;
        rowIssues = [{ loc: ['file', row, columnOf(e.param.split('.').slice(1))], msg: `Row ${row}: ${e.message}`, type: e.code }];
      }
    }
    first ??= { code, param: `file.${rowIssues[0].loc.slice(1).join('.')}`, message: rowIssues[0].msg };
    issues.push(...rowIssues);
  }
  if (!first) return;
  throw new ApiError(422, 'invalid_request_error', code422(first.code), first.message, { param: first.param, issues: issues.slice(0, MAX_ISSUES) });
}
