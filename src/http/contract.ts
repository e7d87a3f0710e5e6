/**
 * The bundled contract (generated/openapi.json) and what the service derives from it: the
 * openapi-backend router/validator, per-operation facts, and response validators.
 *
 * openapi-backend 5 checks documents against the 3.0 meta-schema in init() and validates with a
 * draft-07 Ajv; we skip its definition check (Spectral and redocly lint the contract) and hand it
 * Ajv2020 so 3.1 schemas (type arrays, const, unevaluatedProperties) validate correctly.
 */
import type { Role } from '../contract/principal.js';
import { OpenAPIBackend, type Document } from 'openapi-backend';
import type { Ajv2020, ValidateFunction, Options as AjvOptions } from 'ajv/dist/2020.js';
import { internalOpenapiDocument, makeAjv, withClosedObjects } from '../contract/documents.js';
import { precompileRouting } from './fast-routing.js';
import { precompileValidation } from './fast-validation.js';

type Json = Record<string, unknown>;
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

export interface OperationInfo {
  operationId: string;
  method: string;
  path: string;
  tags: string[];
  /** JSON pointer of the operation inside the bundle. */
  pointer: string;
  /** Declared response statuses (as written: '200', '4XX', 'default'). */
  statuses: string[];
  requestContentTypes: string[];
  requestBodyRequired: boolean;
  listShaped422: boolean;
  /** The operation declares the `Idempotency-Key` header: the router applies src/http/idempotency.ts. */
  idempotent: boolean;
  /** The handler validates the request itself, after checks the spec orders before validation. */
  validateInHandler: boolean;
  security: Array<Record<string, string[]>>;
  /**
   * The least member role a dashboard session needs for this developer operation (`x-minimum-role`;
   * by default `viewer` for GET, `developer` otherwise). API keys are not subject to it.
   */
  minimumRole: Role;
}

export interface ResolvedResponse {
  pointer: string;
  headers: Record<string, { required?: boolean; schemaPointer: string }>;
  content: Record<string, string | null>;
}

function escapePointer(s: string): string {
  return s.replace(/~/g, '~0').replace(/\//g, '~1');
}

function resolveIn(doc: unknown, ref: string): unknown {
  const parts = ref
    .replace(/^#\//, '')
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  let node: unknown = doc;
  for (const part of parts) node = (node as Json | undefined)?.[part];
  return node;
}

/**
 * A tagged union (`oneOf` of object schemas with a `discriminator`, by `$ref` or inline) as one object:
 * every variant's properties (the first variant's definition of a shared one), the discriminator any
 * of the variants' values and not required, required what every variant requires, nothing else.
 */
export function oneObject(doc: Json, union: Json): Json {
  const deref = (s: Json): Json => (typeof s.$ref === 'string' ? deref(resolveIn(doc, s.$ref) as Json) : s);
  const tagged = deref(union);
  const tag = (tagged.discriminator as { propertyName?: string } | undefined)?.propertyName;
  if (!Array.isArray(tagged.oneOf) || !tag) throw new Error('x-validate-as: one-object needs a oneOf with a discriminator');
  const variants = (tagged.oneOf as Json[]).map(deref);
  const properties: Record<string, Json> = {};
  const tags: unknown[] = [];
  for (const v of variants) {
    for (const [name, schema] of Object.entries((v.properties ?? {}) as Record<string, Json>)) {
      if (name === tag) tags.push(...((schema.enum as unknown[] | undefined) ?? [schema.const]));
      else properties[name] ??= schema;
    }
  }
  properties[tag] = { type: 'string', enum: [...new Set(tags)] };
  const required = ((variants[0].required ?? []) as string[]).filter((r) => r !== tag && variants.every((v) => ((v.required ?? []) as string[]).includes(r)));
  return { type: 'object', additionalProperties: false, required, properties };
}

export class Contract {
  readonly document: Json;
  readonly operations = new Map<string, OperationInfo>();
  private readonly ajv = makeAjv({ allErrors: false });
  private readonly validators = new Map<string, ValidateFunction>();
  /** Request bodies a handler validates itself are reported with every problem at once. */
  private requestAjv: Ajv2020 | undefined;
  private readonly requestValidators = new Map<string, ValidateFunction>();

  constructor(document: Json) {
    this.document = document;
    // Responses are checked strictly: against a copy whose object schemas refuse unlisted fields (see withClosedObjects).
    this.ajv.addSchema(withClosedObjects(document), 'openapi.json');
    const paths = (document.paths ?? {}) as Record<string, Json>;
    const globalSecurity = (document.security ?? []) as OperationInfo['security'];
    for (const [p, item] of Object.entries(paths)) {
      for (const method of HTTP_METHODS) {
        const op = item[method] as Json | undefined;
        if (!op) continue;
        const responses = (op.responses ?? {}) as Record<string, Json>;
        const requestBody = this.deref(op.requestBody as Json | undefined);
        const r422 = responses['422'] as Json | undefined;
        this.operations.set(op.operationId as string, {
          operationId: op.operationId as string,
          method: method.toUpperCase(),
          path: p,
          tags: (op.tags as string[]) ?? [],
          pointer: `#/paths/${escapePointer(p)}/${method}`,
          statuses: Object.keys(responses),
          requestContentTypes: Object.keys((requestBody?.content as Json) ?? {}),
          requestBodyRequired: Boolean(requestBody?.required),
          listShaped422: r422?.$ref === '#/components/responses/ValidationErrorList',
          idempotent: [...((item.parameters as Json[] | undefined) ?? []), ...((op.parameters as Json[] | undefined) ?? [])].some((p) => {
            const param = this.deref(p);
            return param?.in === 'header' && String(param.name).toLowerCase() === 'idempotency-key';
          }),
          validateInHandler: op['x-validate-in-handler'] === true,
          security: (op.security as OperationInfo['security']) ?? globalSecurity,
          minimumRole: (op['x-minimum-role'] as Role | undefined) ?? (method === 'get' ? 'viewer' : 'developer'),
        });
      }
    }
  }

  static load(document: Json = internalOpenapiDocument()): Contract {
    return new Contract(document);
  }

  usesListShaped422(operationId: string): boolean {
    return this.operations.get(operationId)?.listShaped422 ?? false;
  }

  /** Follows local `$ref`s inside the bundle. */
  private deref<T extends Json | undefined>(node: T): T {
    let current = node as Json | undefined;
    for (let i = 0; current && typeof current.$ref === 'string' && i < 10; i++) {
      current = this.resolvePointer(current.$ref as string) as Json;
    }
    return current as T;
  }

  private resolvePointer(ref: string): unknown {
    return resolveIn(this.document, ref);
  }

  /** The declared response for a status: exact, then `4XX`-style range, then `default`. */
  response(operationId: string, status: number): ResolvedResponse | null {
    const info = this.operations.get(operationId);
    if (!info) return null;
    const key = [String(status), `${String(status)[0]}XX`, 'default'].find((k) => info.statuses.includes(k));
    if (!key) return null;
    let pointer = `${info.pointer}/responses/${key}`;
    let node = this.resolvePointer(pointer) as Json;
    while (typeof node.$ref === 'string') {
      pointer = node.$ref;
      node = this.resolvePointer(pointer) as Json;
    }
    const headers: ResolvedResponse['headers'] = {};
    for (const [name, h] of Object.entries((node.headers ?? {}) as Record<string, Json>)) {
      let hp = `${pointer}/headers/${escapePointer(name)}`;
      let hn = h;
      while (typeof hn.$ref === 'string') {
        hp = hn.$ref;
        hn = this.resolvePointer(hp) as Json;
      }
      headers[name] = { required: hn.required === true, schemaPointer: `${hp}/schema` };
    }
    const content: ResolvedResponse['content'] = {};
    for (const [type, media] of Object.entries((node.content ?? {}) as Record<string, Json>)) {
      content[type] = media.schema ? `${pointer}/content/${escapePointer(type)}/schema` : null;
    }
    return { pointer, headers, content };
  }

  /**
   * A validator for the schema at a pointer of the bundle (compiled once), strict: object schemas that
   * say nothing about other properties refuse them (withClosedObjects), as the response check needs.
   */
  validator(schemaPointer: string): ValidateFunction {
    let v = this.validators.get(schemaPointer);
    if (!v) {
      v = this.ajv.compile({ $ref: `openapi.json${schemaPointer}` });
      this.validators.set(schemaPointer, v);
    }
    return v;
  }

  /** A validator reporting every problem, for request bodies a handler validates itself (compiled once). */
  requestValidator(schemaPointer: string): ValidateFunction {
    let v = this.requestValidators.get(schemaPointer);
    if (!v) {
      if (!this.requestAjv) {
        // verbose: errors carry their schema, so validation.ts can read `x-unsupported-values`.
        this.requestAjv = makeAjv({ allErrors: true, verbose: true });
        this.requestAjv.addSchema(this.document, 'openapi.json');
      }
      v = this.requestAjv.compile({ $ref: `openapi.json${schemaPointer}` });
      this.requestValidators.set(schemaPointer, v);
    }
    return v;
  }

  /**
   * The document the router validates requests with: the contract, except that a request media type
   * with `x-validate-as: one-object` (its schema a tagged union, `oneOf` with a `discriminator`) is
   * validated as the union's variants made one object (`oneObject`), so that the handler applies the
   * rules that tell the variants apart itself, each with its own code.
   */
  private routingDocument(): Json {
    const doc = structuredClone(this.document);
    for (const info of this.operations.values()) {
      const content = resolveIn(doc, `${info.pointer}/requestBody/content`) as Record<string, Json> | undefined;
      for (const media of Object.values(content ?? {})) {
        if (media['x-validate-as'] === 'one-object') media.schema = oneObject(doc, media.schema as Json);
      }
    }
    return doc;
  }

  /** A fresh openapi-backend instance on this document (routing + request validation). */
  async backend(): Promise<OpenAPIBackend> {
    const api = new OpenAPIBackend({
      definition: this.routingDocument() as unknown as Document,
      strict: true,
      // quick: validators are compiled on an operation's first request instead of all at start (which
      // took seconds for ~75 operations, including response validators we never use: our own
      // response check in response-check.ts does that job), and its 3.0 meta-schema check of the
      // definition, which rejects valid 3.1 documents, is skipped (the linters validate the contract).
      quick: true,
      validate: (c) => !this.operations.get(c.operation.operationId ?? '')?.validateInHandler,
      // verbose: errors carry their schema, so validation.ts can read `x-unsupported-values`.
      ajvOpts: { allErrors: true, strict: false, verbose: true },
      customizeAjv: (_original, ajvOpts) => makeAjv(ajvOpts as AjvOptions) as never,
    });
    await api.init();
    precompileRouting(api);
    precompileValidation(api);
    return api;
  }
}
