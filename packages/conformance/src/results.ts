/**
 * What the checks found, as test cases: one per operation and check (`createAgent: response matches
 * contract`), so a CI system shows which operation broke, and one for a check that concerns no single
 * operation. Reports: a readable summary, TAP, JUnit XML and JSON, all with the same cases.
 */

/** The checks: an id, what a case of it is called after the operation, and what it expects. */
export const CHECKS = {
  'contract-document': {
    label: 'declared as in the reference contract',
    description: 'the deployment serves an OpenAPI 3.1 document whose operations include those of the reference contract',
  },
  response: {
    label: 'response matches contract',
    description: 'every response has a declared status, content type, required headers and a body valid against the schema, and is never a 5xx',
  },
  authentication: {
    label: 'answers 401 without valid credentials',
    description: 'every secured operation answers 401 in the error envelope without credentials or with an unknown token',
  },
  'session-only-routes': { label: 'refuses an API key', description: 'key and member routes refuse API keys (401)' },
  reads: { label: 'reads its own workspace', description: 'every read operation answers its own workspace with a 2xx' },
  isolation: {
    label: "keeps other workspaces' resources out",
    description: "another workspace's ids answer 403 or 404 with no data, and lists never show another workspace's resources",
  },
  'bad-bodies': {
    label: 'refuses bad bodies with a declared 4xx',
    description: 'malformed and mistyped bodies are refused with a declared 4xx, never a 5xx; unknown fields give 422 naming them',
  },
  writes: { label: 'writes as declared', description: 'create, read, update and delete answer as declared, and a deleted resource is gone' },
  'webhook-signatures': {
    label: 'signed call.completed delivery',
    description: 'a call.completed delivery carries an X-Webhook-Signature (and a Standard Webhooks signature) that verifies with the secret from the API',
  },
} as const;

export type CheckId = keyof typeof CHECKS;

export interface CaseResult {
  /** `<operationId>: <label>`, or the check's id when the case concerns no one operation. */
  name: string;
  operation: string | null;
  check: CheckId;
  violations: string[];
  /** Why the case did not run. */
  skipped?: string;
  /** Requests made and expectations met, to say what a passing case covered. */
  assertions: number;
}

export class Results {
  private readonly byName = new Map<string, CaseResult>();
  private current: CheckId | undefined;
  /** Checks skipped as a whole, with the reason. */
  private readonly skippedChecks = new Map<CheckId, string>();

  /** `selected`: the operations whose cases are reported (--operations, --skip-operations). */
  constructor(readonly selected: (operationId: string) => boolean = () => true) {}

  get cases(): CaseResult[] {
    return [...this.byName.values()];
  }

  private case(check: CheckId, operation: string | null): CaseResult | undefined {
    if (operation !== null && !this.selected(operation)) return undefined;
    const name = operation === null ? check : `${operation}: ${CHECKS[check].label}`;
    let c = this.byName.get(name);
    if (!c) {
      c = { name, operation, check, violations: [], assertions: 0 };
      this.byName.set(name, c);
    }
    return c;
  }

  /** The check that the next expectations belong to. */
  begin(check: CheckId): void {
    this.current = check;
  }

  /** The current check does not run at all (one case says why). */
  skip(reason: string): void {
    if (!this.current) return;
    this.skippedChecks.set(this.current, reason);
    const c = this.case(this.current, null);
    if (c) c.skipped = reason;
  }

  /** One expectation met, by an operation (or by the check as a whole). */
  pass(operation: string | null, check: CheckId | undefined = this.current): void {
    if (!check) return;
    const c = this.case(check, operation);
    if (c) c.assertions += 1;
  }

  fail(operation: string | null, message: string, check: CheckId | undefined = this.current): void {
    if (!check) return;
    const c = this.case(check, operation);
    if (c && !c.violations.includes(message)) c.violations.push(message);
  }

  expect(condition: boolean, message: string, operation: string | null = null): void {
    if (condition) this.pass(operation);
    else this.fail(operation, message);
  }

  get failed(): boolean {
    return this.cases.some((c) => c.violations.length > 0);
  }

  counts(): { cases: number; passed: number; failed: number; skipped: number } {
    const cases = this.cases;
    const failed = cases.filter((c) => c.violations.length).length;
    const skipped = cases.filter((c) => c.skipped && !c.violations.length).length;
    return { cases: cases.length, passed: cases.length - failed - skipped, failed, skipped };
  }
}

const statusOf = (c: CaseResult) => (c.violations.length ? 'fail' : c.skipped ? 'skip' : 'pass');

export function summary(r: Results, baseUrl: string): string {
  const lines = [`Conformance of ${baseUrl}`, ''];
  for (const check of Object.keys(CHECKS) as CheckId[]) {
    const cases = r.cases.filter((c) => c.check === check);
    if (!cases.length) continue;
    const failed = cases.filter((c) => c.violations.length);
    const skipped = cases.find((c) => c.skipped && c.operation === null);
    const ops = cases.filter((c) => c.operation !== null).length;
    const what = ops ? `${ops} operation${ops === 1 ? '' : 's'}` : `${cases.reduce((n, c) => n + c.assertions, 0)} expectations`;
    if (skipped && !failed.length) lines.push(`SKIP  ${check}: ${CHECKS[check].description} (${skipped.skipped})`);
    else lines.push(`${failed.length ? 'FAIL' : 'PASS'}  ${check}: ${CHECKS[check].description} (${what}${failed.length ? `, ${failed.length} failed` : ''})`);
    for (const c of failed) {
      lines.push(`  FAIL  ${c.name}`);
      for (const v of c.violations.slice(0, 20)) lines.push(`        - ${v}`);
      if (c.violations.length > 20) lines.push(`        ... and ${c.violations.length - 20} more`);
    }
  }
  const n = r.counts();
  lines.push('', n.failed ? `${n.failed} of ${n.cases} test cases failed.` : `All ${n.passed} test cases passed${n.skipped ? ` (${n.skipped} skipped)` : ''}.`);
  return lines.join('\n');
}

export function tap(r: Results): string {
  const cases = r.cases;
  const lines = ['TAP version 13', `1..${cases.length}`];
  cases.forEach((c, i) => {
    const status = statusOf(c);
    if (status === 'skip') lines.push(`ok ${i + 1} - ${c.name} # SKIP ${c.skipped}`);
    else if (status === 'pass') lines.push(`ok ${i + 1} - ${c.name}`);
    else {
      lines.push(`not ok ${i + 1} - ${c.name}`, '  ---', `  check: ${c.check}`, '  violations:');
      for (const v of c.violations) lines.push(`    - ${JSON.stringify(v)}`);
      lines.push('  ...');
    }
  });
  return lines.join('\n') + '\n';
}

// XML 1.0 cannot carry these control characters, not even escaped: they are dropped.
const xml = (s: string) =>
  s
    .replace(/[<>&'"]/g, (ch) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[ch]!)
    // eslint-disable-next-line no-control-regex
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/g, '');

export function junit(r: Results, seconds: number): string {
  const n = r.counts();
  const cases = r.cases.map((c) => {
    const status = statusOf(c);
    const inner =
      status === 'fail'
        ? `<failure message="${xml(`${c.violations.length} violation(s)`)}">${xml(c.violations.join('\n'))}</failure>`
        : status === 'skip'
          ? `<skipped message="${xml(c.skipped!)}"/>`
          : '';
    // classname groups a CI system's view by operation (or by check, for a case of no one operation).
    return `    <testcase classname="voice-agent-conformance.${xml(c.operation ?? c.check)}" name="${xml(c.name)}">${inner}</testcase>`;
  });
  const totals = `tests="${n.cases}" failures="${n.failed}" skipped="${n.skipped}" time="${seconds.toFixed(3)}"`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites ${totals}>`,
    `  <testsuite name="voice-agent-conformance" ${totals}>`,
    ...cases,
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}

/** The JSON report: the totals, then every case with its status. */
export function jsonReport(r: Results, baseUrl: string, seconds: number): string {
  return `${JSON.stringify(
    {
      base_url: baseUrl,
      seconds: Number(seconds.toFixed(3)),
      ...r.counts(),
      cases: r.cases.map((c) => ({
        name: c.name,
        operation: c.operation,
        check: c.check,
        status: statusOf(c),
        assertions: c.assertions,
        violations: c.violations,
        ...(c.skipped ? { skip_reason: c.skipped } : {}),
      })),
    },
    null,
    2,
  )}\n`;
}
