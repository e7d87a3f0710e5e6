/** The deployment under test: HTTP requests to it, each response checked against the contract. */
import type { Contract, Operation, Reply } from './contract.js';
import type { Results } from './results.js';

export interface Call {
  op: Operation;
  params?: Record<string, string>;
  query?: Record<string, string>;
  token?: string | null;
  /** A JSON value, or raw text with `contentType`. */
  body?: unknown;
  raw?: { text: string; contentType: string };
}

export interface Response extends Reply {
  json: any;
}

export class Target {
  constructor(
    readonly baseUrl: string,
    readonly contract: Contract,
    private readonly results: Results,
    private readonly timeoutMs = 30_000,
  ) {}

  op(operationId: string): Operation | undefined {
    return this.contract.operations.find((o) => o.operationId === operationId);
  }

  url(op: Operation, params: Record<string, string> = {}, query: Record<string, string> = {}): string {
    const path = op.path.replace(/\{([^}]+)\}/g, (_, name: string) => encodeURIComponent(params[name] ?? `conformance_missing_${name}`));
    const qs = new URLSearchParams(query).toString();
    return `${this.baseUrl}${path}${qs ? `?${qs}` : ''}`;
  }

  /**
   * Sends the request; the response is checked against the operation, as the operation's
   * `response matches contract` case (`during` names the check that sent it, for the message).
   */
  async send(during: string, call: Call): Promise<Response> {
    const headers: Record<string, string> = {};
    if (call.token) headers.Authorization = `Bearer ${call.token}`;
    let payload: string | undefined;
    if (call.raw) {
      headers['Content-Type'] = call.raw.contentType;
      payload = call.raw.text;
    } else if (call.body !== undefined) {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(call.body);
    }
    const res = await fetch(this.url(call.op, call.params, call.query), {
      method: call.op.method,
      headers,
      body: payload,
      redirect: 'manual',
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    const reply = { status: res.status, headers: res.headers, text, json };
    const problems = this.contract.check(call.op, reply);
    const where = `${call.op.method} ${call.op.path} (${call.op.operationId})`;
    const id = call.op.operationId;
    if (problems.length) this.results.fail(id, `${where} answered ${res.status}: ${problems.join('; ')} (during ${during})`, 'response');
    if (res.status >= 500)
      this.results.fail(
        id,
        `${where} answered ${res.status}: a server error${json && typeof json === 'object' ? ` (${JSON.stringify((json as any).error?.code ?? '')})` : ''} (during ${during})`,
        'response',
      );
    if (!problems.length && res.status < 500) this.results.pass(id, 'response');
    return reply;
  }
}
