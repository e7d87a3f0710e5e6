/**
 * A conversation's redactor: its setting compiled once as the conversation starts (custom patterns on
 * re2js, the phone country resolved), and the redaction of texts and of the content of records and
 * messages. Each span found becomes `[REDACTED:<kind>]`; overlapping spans are resolved to the one
 * that starts first (the longest among those starting together, then the setting's order: entities,
 * then patterns). A text whose search would pass the work budget (its length times the patterns'
 * program size) is not searched and becomes `[REDACTED:unchecked]` whole: never kept unchecked.
 */
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';
import type { RE2JS } from 're2js';
import { findEntity, phoneCountry, type Span } from './recognisers.js';
import { compilePattern, type RedactionSetting, type RedactionTarget } from './setting.js';

/** Work of one text's custom-pattern search, at most: its UTF-16 length times the patterns' instructions. */
export const WORK_MAX = 1_000_000;

export const token = (kind: string) => `[REDACTED:${kind}]`;

interface TranscriptLike {
  text: string;
  dtmf?: string;
}

export class Redactor {
  private readonly patterns: Array<{ name: string; re: RE2JS }> = [];
  private readonly programSize: number;
  private readonly country: CountryCode | null;
  private readonly order = new Map<string, number>();

  /**
   * `personNumber`: the person's phone number on a call (whose country's national numbers are found
   * when the setting names no country).
   */
  constructor(
    readonly setting: RedactionSetting,
    personNumber: string | null = null,
  ) {
    for (const p of setting.custom_patterns) {
      const re = compilePattern(p.pattern);
      // Checked on write; a pattern stored before a tighter check is dropped rather than run unbounded.
      if ('matcher' in re) this.patterns.push({ name: p.name, re });
    }
    this.programSize = this.patterns.reduce((n, p) => n + p.re.programSize(), 0);
    this.country = phoneCountry(setting.phone_country) ?? (personNumber ? (parsePhoneNumberFromString(personNumber)?.country ?? null) : null);
    [...setting.entities, ...this.patterns.map((p) => p.name)].forEach((kind, i) => this.order.set(kind, i));
  }

  /** A redactor for a stored setting; null when there is none. */
  static of(setting: RedactionSetting | null | undefined, personNumber: string | null = null): Redactor | null {
    return setting ? new Redactor(setting, personNumber) : null;
  }

  covers(target: RedactionTarget): boolean {
    return this.setting.targets.includes(target);
  }

  /** The spans to redact in `text`, in order and not overlapping; null when the text is beyond the work budget. */
  spans(text: string): Span[] | null {
    if (!text) return [];
    if (this.programSize > 0 && text.length * this.programSize > WORK_MAX) return null;
    const found: Span[] = [];
    for (const kind of this.setting.entities) found.push(...findEntity(kind, text, this.country));
    for (const { name, re } of this.patterns) {
      const m = re.matcher(text);
      while (m.find()) if (m.end() > m.start()) found.push({ start: m.start(), end: m.end(), kind: name });
    }
    found.sort((a, b) => a.start - b.start || b.end - a.end || this.order.get(a.kind)! - this.order.get(b.kind)!);
    const kept: Span[] = [];
    for (const s of found) if (!kept.length || s.start >= kept[kept.length - 1].end) kept.push(s);
    return kept;
  }

  /** `text` with every span replaced by its token. */
  text(text: string): string {
    const spans = this.spans(text);
    if (spans === null) return token('unchecked');
    if (!spans.length) return text;
    let out = '';
    let at = 0;
    for (const s of spans) {
      out += text.slice(at, s.start) + token(s.kind);
      at = s.end;
    }
    return out + text.slice(at);
  }

  /** Whether `text` has anything to redact (a text beyond the work budget has). */
  finds(text: string): boolean {
    const spans = this.spans(text);
    return spans === null || spans.length > 0;
  }

  /** Every string of a JSON value redacted (keys kept). */
  value<T>(v: T): T {
    if (typeof v === 'string') return this.text(v) as T;
    if (Array.isArray(v)) return v.map((x) => this.value(x)) as T;
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, this.value(x)])) as T;
    return v;
  }

  /** A transcript entry (or a message carrying one): `text` and `dtmf` redacted. */
  turn<T extends TranscriptLike>(t: T): T {
    return { ...t, text: this.text(t.text), ...(t.dtmf ? { dtmf: this.text(t.dtmf) } : {}) };
  }

  /** A tool-call record (or event): `arguments`, `result` and `error` redacted. */
  toolCall<T extends { arguments?: unknown; result?: unknown; error?: string | null }>(r: T): T {
    return {
      ...r,
      ...('arguments' in r ? { arguments: this.value(r.arguments) } : {}),
      ...('result' in r ? { result: this.value(r.result) } : {}),
      ...(typeof r.error === 'string' ? { error: this.text(r.error) } : {}),
    };
  }

  /** Post-call analysis as records and `call.completed` carry it: summary, unanswered questions, `data`, `success.reason`. */
  analysis<T extends AnalysisLike>(a: T): T {
    return {
      ...a,
      ...(typeof a.summary === 'string' ? { summary: this.text(a.summary) } : {}),
      ...(Array.isArray(a.unanswered_questions) ? { unanswered_questions: a.unanswered_questions.map((q) => this.text(q)) } : {}),
      ...(a.data ? { data: this.value(a.data) } : {}),
      ...(a.success ? { success: { ...a.success, reason: this.text(a.success.reason) } } : {}),
    };
  }

  /** The conversation content of a record or message: transcript, tool calls, transfers' reasons, analysis. */
  content<T extends ContentLike>(c: T): T {
    return {
      ...this.analysis(c),
      ...(Array.isArray(c.transcript) ? { transcript: c.transcript.map((t) => this.turn(t)) } : {}),
      ...(Array.isArray(c.tool_calls) ? { tool_calls: c.tool_calls.map((r) => this.toolCall(r)) } : {}),
      ...(Array.isArray(c.transfers)
        ? { transfers: c.transfers.map((t) => ({ ...t, reason: typeof t.reason === 'string' ? this.text(t.reason) : t.reason })) }
        : {}),
    };
  }
}

interface AnalysisLike {
  summary?: string | null;
  unanswered_questions?: string[] | null;
  data?: Record<string, unknown> | null;
  success?: { met: boolean; reason: string } | null;
}

interface ContentLike extends AnalysisLike {
  transcript?: TranscriptLike[];
  tool_calls?: Array<{ arguments?: unknown; result?: unknown; error?: string | null }> | null;
  transfers?: Array<{ reason: string | null }> | null;
}
