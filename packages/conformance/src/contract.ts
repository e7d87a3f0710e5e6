/**
 * The contract as the checks use it: the operations of an OpenAPI 3.1 document (as a deployment
 * serves it at /openapi.json), and the check of one response against its operation: a declared
 * status, a declared content type, the declared required headers, a body valid against the schema.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

type Json = Record<string, any>;

export interface Operation {
  operationId: string;
  method: string;
  path: string;
  tags: string[];
  /** Alternatives of security requirements; empty: public. */
  security: Array<Record<string, string[]>>;
  pathParams: string[];
  requestContentTypes: string[];
  /** The JSON request body's example, when the contract gives one. */
  bodyExample: unknown;
  statuses: string[];
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
}

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

const escape = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');

export class Contract {
  readonly operations: Operation[] = [];
  private readonly ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(readonly document: Json) {
    addFormats.default(this.ajv);
    for (const f of ['int32', 'int64', 'float', 'double', 'byte', 'binary', 'password']) this.ajv.addFormat(f, true);
    this.ajv.addSchema(document, 'openapi.json');
    const globalSecurity = (document.security ?? []) as Operation['security'];
    for (const [path, item] of Object.entries((document.paths ?? {}) as Record<string, Json>)) {
      for (const method of METHODS) {
        const op = item[method] as Json | undefined;
        if (!op?.operationId) continue;
        const body = this.deref(op.requestBody);
        const params = [...((item.parameters as Json[]) ?? []), ...((op.parameters as Json[]) ?? [])].map((p) => this.deref(p));
        this.operations.push({
          operationId: op.operationId,
          method: method.toUpperCase(),
          path,
          tags: op.tags ?? [],
          security: (op.security as Operation['security']) ?? globalSecurity,
          pathParams: params.filter((p) => p?.in === 'path').map((p) => p!.name as string),
          requestContentTypes: Object.keys(body?.content ?? {}),
          bodyExample: body?.content?.['application/json']?.example,
          statuses: Object.keys(op.responses ?? {}),
        });
      }
    }
  }

  private deref(node: Json | undefined): Json | undefined {
    let n = node;
    for (let i = 0; n && typeof n.$ref === 'string' && i < 10; i++) {
      n = n.$ref
        .slice(2)
        .split('/')
        .reduce((o: Json | undefined, k: string) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], this.document);
    }
    return n;
  }

  private validator(pointer: string): ValidateFunction {
    let v = this.validators.get(pointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `openapi.json${pointer}` });
      this.validators.set(pointer, v);
    }
    return v;
  }

  /** The problems of a response to `op`, none when it is what the contract declares. */
  check(op: Operation, reply: Reply): string[] {
    const base = `#/paths/${escape(op.path)}/${op.method.toLowerCase()}/responses`;
    const responses = this.deref({ $ref: base }) ?? {};
    const key =
      String(reply.status) in responses
        ? String(reply.status)
        : `${String(reply.status)[0]}XX` in responses
          ? `${String(reply.status)[0]}XX`
          : 'default' in responses
            ? 'default'
            : null;
    if (!key) return [`status ${reply.status} is not declared (declared: ${Object.keys(responses).join(', ')})`];
    const response = this.deref(responses[key]) ?? {};
    const problems: string[] = [];
    for (const [name, h] of Object.entries((response.headers ?? {}) as Record<string, Json>)) {
      const header = this.deref(h);
      if (header?.required && !reply.headers.get(name)) problems.push(`required header ${name} is missing`);
    }
    const content = (response.content ?? {}) as Record<string, Json>;
    const types = Object.keys(content);
    if (types.length === 0) {
      if (reply.text.length > 0) problems.push(`status ${reply.status} declares no body, got ${reply.text.length} bytes`);
      return problems;
    }
    const type = (reply.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase();
    const declared = types.find((t) => t.toLowerCase() === type);
    if (!declared) return [...problems, `content type '${type}' is not declared for ${reply.status} (declared: ${types.join(', ')})`];
    if (!declared.endsWith('json') || !content[declared].schema) return problems;
    let body: unknown;
    try {
      body = JSON.parse(reply.text);
    } catch {
      return [...problems, `${reply.status} body is not JSON`];
    }
    const pointer = this.schemaPointer(`${base}/${escape(key)}`, responses[key], declared);
    const validate = this.validator(pointer);
    if (!validate(body)) {
      const e = validate.errors?.[0];
      problems.push(
        `${reply.status} body does not match the schema: ${e?.instancePath || '/'} ${e?.message ?? ''}${e?.params ? ' ' + JSON.stringify(e.params) : ''}`,
      );
    }
    return problems;
  }

  /** A JSON pointer to the schema of one response's content, following a `$ref`ed response. */
  private schemaPointer(pointer: string, response: Json, type: string): string {
    const target = typeof response?.$ref === 'string' ? response.$ref.slice(1) : pointer.slice(1);
    return `#${target}/content/${escape(type)}/schema`;
  }

  /** Whether a body is the error envelope of the contract. */
  isErrorEnvelope(body: unknown): boolean {
    if (!this.document.components?.schemas?.Error) return typeof body === 'object' && body !== null && 'error' in body;
    return this.validator('#/components/schemas/Error')(body) as boolean;
  }
}
