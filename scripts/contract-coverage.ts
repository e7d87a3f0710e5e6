/**
 * The contract coverage report: every declared (operationId, status) pair and whether a test
 * received it. `npm run contract:coverage` prints the report of the last test run.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Contract } from '../src/http/contract.js';

export function printCoverage(dir: string): void {
  const seen = new Set<string>();
  if (fs.existsSync(dir)) {
    for (const f of fs.readdirSync(dir)) for (const pair of JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as string[]) seen.add(pair);
  }
  const contract = Contract.load();
  const rows: string[] = [];
  let declared = 0;
  let covered = 0;
  for (const info of contract.operations.values()) {
    const marks = info.statuses.map((s) => {
      declared++;
      const hit = seen.has(`${info.operationId} ${s}`);
      if (hit) covered++;
      return hit ? `${s}✓` : `${s}·`;
    });
    rows.push(`  ${info.operationId.padEnd(32)} ${marks.join(' ')}`);
  }
  const undeclared = [...seen].filter((p) => {
    const [op, status] = p.split(' ');
    return !contract.operations.get(op)?.statuses.includes(status);
  });
  console.log(`\nContract coverage: ${covered} of ${declared} declared (operationId, status) pairs exercised by tests (✓ exercised, · not)`);
  console.log(rows.join('\n'));
  if (undeclared.length) console.log(`Responses outside the contract: ${undeclared.join(', ')}`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  printCoverage(path.resolve(import.meta.dirname, '../.contract-coverage'));
}
