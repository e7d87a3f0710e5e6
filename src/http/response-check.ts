/**
 * The response contract check: every response must be declared for its operation (exact status),
 * with a declared content type, the declared required headers, and a body valid against the schema
 * (strictly: a field the schema does not list fails, though response schemas are open to clients;
 * see withClosedObjects in src/contract/documents.ts).
 * openapi-backend's validateResponse checks none of the status, headers or non-JSON content, hence this.
 * Responses outside any operation (unknown route, wrong method) must be the error envelope.
 * `enforce` (tests) turns a violation into a 500 `contract_violation`; `log` only logs it.
 * Observed (operationId, status) pairs are recorded for the coverage report.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import type { Contract } from './contract.js';

const observed = new Set<string>();
let coverageDir: string | undefined;
let exitHookInstalled = false;

function recordCoverage(dir: string | undefined, operationId: string, status: number): void {
  if (!dir) return;
  coverageDir = dir;
  observed.add(`${operationId} ${status}`);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      if (!coverageDir || observed.size === 0) return;
      fs.mkdirSync(coverageDir, { recursive: true });
      fs.writeFileSync(path.join(coverageDir, `${process.pid}-${randomBytes(4).toString('hex')}.json`), JSON.stringify([...observed]));
    });
  }
}

function mediaType(ctx: Context): string {
  return (ctx.response.type || '').split(';')[0].trim().toLowerCase();
}

export function checkResponse(contract: Contract, ctx: Context): string[] {
  const problems: string[] = [];
  const operationId = ctx.state.operationId as string | undefined;
  const status = ctx.status;
  if (!operationId) {
    // A CORS preflight answered by the CORS middleware is not an operation of the contract.
    if (ctx.method === 'OPTIONS' && status < 400) return problems;
    const v = contract.validator('#/components/schemas/Error');
    if (!v(ctx.body)) problems.push(`unrouted ${status} response is not the error envelope: ${JSON.stringify(v.errors)}`);
    return problems;
  }
  const declared = contract.response(operationId, status);
  if (!declared) return [`status ${status} is not declared for ${operationId}`];
  for (const [name, h] of Object.entries(declared.headers)) {
    const value = ctx.response.get(name);
    if (!value) {
      if (h.required) problems.push(`required header ${name} missing`);
      continue;
    }
    const v = contract.validator(h.schemaPointer);
    if (!v(value)) problems.push(`header ${name}=${value} invalid: ${JSON.stringify(v.errors)}`);
  }
  const types = Object.keys(declared.content);
  const hasBody = ctx.body !== undefined && ctx.body !== null && status !== 204;
  if (types.length === 0) {
    if (hasBody) problems.push(`status ${status} of ${operationId} declares no body but one was sent`);
    return problems;
  }
  const type = mediaType(ctx);
  if (!types.includes(type)) return [...problems, `content type '${type}' not declared (declared: ${types.join(', ')})`];
  const schemaPointer = declared.content[type];
  if (schemaPointer && (type === 'application/json' || typeof ctx.body === 'string')) {
    const v = contract.validator(schemaPointer);
    if (!v(ctx.body)) problems.push(`body invalid: ${JSON.stringify(v.errors?.slice(0, 5))}`);
  }
  return problems;
}

/** Checks the settled answer of a request (front-door.ts, after the error envelope): logs a violation, and in `enforce` answers 500 instead. */
export function responseChecker(contract: Contract, mode: 'log' | 'enforce', log: Logger, coverage?: string): (ctx: Context) => void {
  return (ctx) => {
    const problems = checkResponse(contract, ctx);
    const operationId = ctx.state.operationId as string | undefined;
    if (operationId) recordCoverage(coverage, operationId, ctx.status);
    if (problems.length === 0) return;
    log.error({ requestId: ctx.state.requestId, operationId, status: ctx.status, problems }, 'response violates the contract');
    if (mode === 'enforce') {
      ctx.status = 500;
      ctx.body = {
        error: {
          type: 'api_error',
          code: 'contract_violation',
          message: `Response of ${operationId ?? ctx.path} violates the contract: ${problems.join('; ')}`,
          param: null,
          request_id: ctx.state.requestId ?? null,
        },
      };
    }
  };
}
