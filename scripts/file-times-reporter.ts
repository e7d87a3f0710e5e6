/**
 * A test reporter beside the spec reporter (scripts/test.ts): writes each test file's time, slowest
 * first, as JSON lines: the sum of its top-level tests' and suites' durations (its own `test:summary`
 * when the runner sends one for the file and that is longer). `npm test` prints the slowest of them,
 * to show where the suite's time goes.
 */
import type { TestEvent } from 'node:test/reporters';

export default async function* fileTimes(source: AsyncIterable<TestEvent>): AsyncGenerator<string> {
  const ms = new Map<string, number>();
  const summary = new Map<string, number>();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0 && event.data.file) {
      ms.set(event.data.file, (ms.get(event.data.file) ?? 0) + (event.data.details.duration_ms ?? 0));
    } else if (event.type === 'test:summary' && event.data.file) {
      summary.set(event.data.file, event.data.duration_ms);
    }
  }
  const took = [...new Set([...ms.keys(), ...summary.keys()])].map((file) => ({
    file,
    seconds: Math.round(Math.max(ms.get(file) ?? 0, summary.get(file) ?? 0) / 100) / 10,
  }));
  took.sort((a, b) => b.seconds - a.seconds);
  for (const t of took) yield `${JSON.stringify(t)}\n`;
}
