/** What the checks found, and its reports: a readable summary, TAP, JUnit XML. */
export interface CheckResult {
  name: string;
  description: string;
  violations: string[];
  skipped?: string;
  /** Requests made and expectations met, to say what a passing check covered. */
  assertions: number;
}

export class Results {
  readonly checks: CheckResult[] = [];
  private current: CheckResult | undefined;

  begin(name: string, description: string): void {
    this.current = { name, description, violations: [], assertions: 0 };
    this.checks.push(this.current);
  }

  skip(reason: string): void {
    if (this.current) this.current.skipped = reason;
  }

  /** One expectation met. */
  pass(): void {
    if (this.current) this.current.assertions += 1;
  }

  fail(check: string, message: string): void {
    const target = this.checks.find((c) => c.name === check) ?? this.current;
    if (target && !target.violations.includes(message)) target.violations.push(message);
  }

  expect(condition: boolean, message: string): void {
    if (condition) this.pass();
    else this.fail(this.current?.name ?? '', message);
  }

  get failed(): boolean {
    return this.checks.some((c) => c.violations.length > 0);
  }
}

export function summary(r: Results, baseUrl: string): string {
  const lines = [`Conformance of ${baseUrl}`, ''];
  for (const c of r.checks) {
    const mark = c.skipped ? 'SKIP' : c.violations.length ? 'FAIL' : 'PASS';
    lines.push(`${mark}  ${c.name}: ${c.description}${c.skipped ? ` (${c.skipped})` : ` (${c.assertions} expectations)`}`);
    for (const v of c.violations.slice(0, 50)) lines.push(`      - ${v}`);
    if (c.violations.length > 50) lines.push(`      ... and ${c.violations.length - 50} more`);
  }
  const failed = r.checks.filter((c) => c.violations.length).length;
  lines.push('', failed ? `${failed} of ${r.checks.length} checks found violations.` : `All ${r.checks.filter((c) => !c.skipped).length} checks passed.`);
  return lines.join('\n');
}

export function tap(r: Results): string {
  const lines = ['TAP version 13', `1..${r.checks.length}`];
  r.checks.forEach((c, i) => {
    if (c.skipped) lines.push(`ok ${i + 1} - ${c.name} # SKIP ${c.skipped}`);
    else if (!c.violations.length) lines.push(`ok ${i + 1} - ${c.name}`);
    else {
      lines.push(`not ok ${i + 1} - ${c.name}`, '  ---', '  violations:');
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
  const failures = r.checks.filter((c) => c.violations.length).length;
  const skipped = r.checks.filter((c) => c.skipped).length;
  const cases = r.checks.map((c) => {
    const inner = c.skipped
      ? `<skipped message="${xml(c.skipped)}"/>`
      : c.violations.length
        ? `<failure message="${xml(`${c.violations.length} violation(s)`)}">${xml(c.violations.join('\n'))}</failure>`
        : '';
    return `    <testcase classname="voice-agent-conformance" name="${xml(c.name)}">${inner}</testcase>`;
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites tests="${r.checks.length}" failures="${failures}" skipped="${skipped}" time="${seconds.toFixed(3)}">`,
    `  <testsuite name="voice-agent-conformance" tests="${r.checks.length}" failures="${failures}" skipped="${skipped}" time="${seconds.toFixed(3)}">`,
    ...cases,
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n');
}
