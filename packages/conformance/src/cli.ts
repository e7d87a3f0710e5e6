/**
 * `voice-agent-conformance --base-url URL [--api-key ek_... [--api-key ek_...]] [--session-token ds_...]
 *  [--allow-writes] [--contract openapi.json] [--operations ID,...] [--skip-operations ID,...]
 *  [--junit FILE] [--json FILE] [--tap] [--receiver-host HOST]`
 * Exit 0: no violation; 1: violations; 2: usage error (or the deployment could not be read).
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { Contract } from './contract.js';
import { Results, jsonReport, junit, summary, tap } from './results.js';
import { Target } from './target.js';
import {
  checkBadBodies,
  checkDocument,
  checkIsolation,
  checkKeyRoutes,
  checkReads,
  checkUnauthenticated,
  checkWebhookSignatures,
  checkWrites,
  signUpWorkspace,
  type RunContext,
} from './checks.js';

const USAGE = `Usage: voice-agent-conformance --base-url URL [options]

Checks a deployment of the voice agent service against its contract (the deployment's own
/openapi.json, and --contract to compare it with ours).

  --base-url URL         the deployment, e.g. https://voice.example.com (required)
  --api-key KEY          an API key (ek_...); give two keys of different workspaces for the isolation checks
  --session-token TOKEN  a dashboard session token (ds_...); with --allow-writes an API key is created with it
  --allow-writes         also create, change and delete resources (its own, removed afterwards) and sign up
                         workspaces when fewer than two keys are given
  --contract FILE        a reference OpenAPI document the deployment's must include
  --receiver-host HOST   the host the deployment can reach this machine at (webhook check; default 127.0.0.1)
  --operations IDS       check only these operations (operationIds, comma-separated; repeatable)
  --skip-operations IDS  check every operation but these (operationIds, comma-separated; repeatable)
                         Operations not checked may still be called as set-up (sign-up, a list read for ids).
  --junit FILE           also write JUnit XML: one test case per operation and check
                         (e.g. "createAgent: response matches contract")
  --json FILE            also write the report as JSON (totals, and every case with its status and violations)
  --tap                  print TAP instead of the summary (the same cases)
  --help                 this text

Exit status: 0 conforms, 1 violations found, 2 usage error or the deployment could not be read.`;

export async function main(
  argv: string[],
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
): Promise<number> {
  let args;
  try {
    args = parseArgs({
      args: argv,
      options: {
        'base-url': { type: 'string' },
        'api-key': { type: 'string', multiple: true },
        'session-token': { type: 'string' },
        'allow-writes': { type: 'boolean', default: false },
        contract: { type: 'string' },
        'receiver-host': { type: 'string', default: '127.0.0.1' },
        operations: { type: 'string', multiple: true },
        'skip-operations': { type: 'string', multiple: true },
        junit: { type: 'string' },
        json: { type: 'string' },
        tap: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    }).values;
  } catch (e) {
    err(`${(e as Error).message}\n\n${USAGE}\n`);
    return 2;
  }
  if (args.help) {
    out(`${USAGE}\n`);
    return 0;
  }
  const baseUrl = (args['base-url'] ?? '').replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]+/.test(baseUrl)) {
    err(`--base-url must be an http(s) URL.\n\n${USAGE}\n`);
    return 2;
  }
  let reference: Contract | undefined;
  if (args.contract) {
    try {
      reference = new Contract(JSON.parse(fs.readFileSync(args.contract, 'utf8')));
    } catch (e) {
      err(`--contract ${args.contract}: ${(e as Error).message}\n`);
      return 2;
    }
  }
  let document: Record<string, unknown>;
  try {
    const res = await fetch(`${baseUrl}/openapi.json`, { signal: AbortSignal.timeout(30_000) });
    if (!res.ok) throw new Error(`GET /openapi.json answered ${res.status}`);
    document = (await res.json()) as Record<string, unknown>;
  } catch (e) {
    err(`Could not read the deployment's contract at ${baseUrl}/openapi.json: ${(e as Error).message}\n`);
    return 2;
  }

  const contract = new Contract(document);
  const ids = (values: string[] | undefined) =>
    (values ?? [])
      .flatMap((v) => v.split(','))
      .map((v) => v.trim())
      .filter(Boolean);
  const only = ids(args.operations);
  const skipped = ids(args['skip-operations']);
  const unknown = [...only, ...skipped].filter((id) => !contract.operations.some((o) => o.operationId === id));
  if (unknown.length) {
    err(`--operations/--skip-operations: the deployment's contract has no operation ${unknown.join(', ')}.\n`);
    return 2;
  }
  const selected = (id: string) => (!only.length || only.includes(id)) && !skipped.includes(id);

  const started = performance.now();
  const results = new Results(selected);
  const target = new Target(baseUrl, contract, results);
  const ctx: RunContext = {
    target,
    results,
    allowWrites: Boolean(args['allow-writes']),
    workspaces: (args['api-key'] ?? []).map((apiKey) => ({ apiKey, ids: new Map() })),
    reference,
    receiverHost: args['receiver-host']!,
    cleanup: [],
    created: new Set(),
    selected,
  };
  try {
    if (ctx.allowWrites && args['session-token'] && ctx.workspaces.length < 2) {
      const createKey = target.op('createApiKey');
      const revoke = target.op('revokeApiKey');
      const key = createKey ? await target.send('setup', { op: createKey, token: args['session-token'], body: { name: 'conformance' } }) : null;
      if (key?.status === 201) {
        ctx.workspaces.push({ apiKey: key.json.key, ids: new Map() });
        if (revoke) ctx.cleanup.push(() => target.send('cleanup', { op: revoke, params: { key_id: key.json.id }, token: args['session-token'] }));
      } else {
        err(`--session-token could not create an API key (${key?.status ?? 'no createApiKey operation'}).\n`);
      }
    }
    while (ctx.allowWrites && ctx.workspaces.length < 2) {
      const ws = await signUpWorkspace(ctx, String(ctx.workspaces.length + 1));
      if (!ws) break;
      ctx.workspaces.push(ws);
    }
    await checkDocument(ctx);
    await checkUnauthenticated(ctx);
    await checkKeyRoutes(ctx);
    await checkWrites(ctx);
    await checkReads(ctx);
    await checkIsolation(ctx);
    await checkBadBodies(ctx);
    await checkWebhookSignatures(ctx);
  } finally {
    for (const undo of ctx.cleanup.reverse()) await undo().catch(() => undefined);
  }
  const seconds = (performance.now() - started) / 1000;
  out(args.tap ? tap(results) : `${summary(results, baseUrl)}\n`);
  if (args.junit) fs.writeFileSync(args.junit, junit(results, seconds));
  if (args.json) fs.writeFileSync(args.json, jsonReport(results, baseUrl, seconds));
  return results.failed ? 1 : 0;
}
