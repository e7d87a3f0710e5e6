/**
 * SIP messages (RFC 3261 section 7): parsing and serialising. Written by hand because no npm parser
 * fits (docs/sip.md): the one stack for node, `sip`, parses with unbounded regular expressions and
 * silently drops what it cannot read. Here every input is bounded (size, header count, line length),
 * anything unreadable throws a SipParseError saying whether a 400 can still be addressed, and header
 * values stay strings read by the small readers below only when the stack needs them.
 */

export const MAX_MESSAGE_BYTES = 65_535;
export const MAX_HEADERS = 128;
export const MAX_HEADER_LINE = 8_192;

export type Headers = Array<[name: string, value: string]>;

export interface SipRequest {
  kind: 'request';
  method: string;
  uri: string;
  headers: Headers;
  body: Buffer;
}

export interface SipResponse {
  kind: 'response';
  status: number;
  reason: string;
  headers: Headers;
  body: Buffer;
}

export type SipMessage = SipRequest | SipResponse;

export class SipParseError extends Error {
  /** The request as far as it was read, when it has what a 400 response needs (Via, From, To, Call-ID, CSeq). */
  constructor(
    message: string,
    readonly partial?: SipRequest,
  ) {
    super(message);
  }
}

const COMPACT: Record<string, string> = {
  i: 'call-id',
  m: 'contact',
  e: 'content-encoding',
  l: 'content-length',
  c: 'content-type',
  f: 'from',
  s: 'subject',
  k: 'supported',
  t: 'to',
  v: 'via',
  o: 'event',
  r: 'refer-to',
  x: 'session-expires',
  u: 'allow-events',
};

const CANONICAL: Record<string, string> = {
  'call-id': 'Call-ID',
  cseq: 'CSeq',
  'www-authenticate': 'WWW-Authenticate',
  'min-se': 'Min-SE',
  rseq: 'RSeq',
  rack: 'RAck',
};

/** Headers whose comma-separated values are separate entries (RFC 3261 section 7.3.1). */
const LIST_HEADERS = new Set(['via', 'route', 'record-route']);

const TOKEN = /^[A-Za-z0-9\-.!%*_+`'~]+$/;
const REQUEST_LINE = /^([A-Za-z0-9\-.!%*_+`'~]+) (\S+) SIP\/2\.0$/;
const STATUS_LINE = /^SIP\/2\.0 ([1-6]\d\d) ?(.*)$/;

export function canonicalName(lower: string): string {
  return CANONICAL[lower] ?? lower.replace(/(^|-)([a-z])/g, (_m, dash: string, c: string) => dash + c.toUpperCase());
}

/** Split on commas outside quotes and angle brackets. */
export function splitList(value: string): string[] {
  const out: string[] = [];
  let depthAngle = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === '"') quoted = false;
    } else if (c === '"') quoted = true;
    else if (c === '<') depthAngle++;
    else if (c === '>') depthAngle = Math.max(0, depthAngle - 1);
    else if (c === ',' && depthAngle === 0) {
      out.push(value.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(value.slice(start).trim());
  return out.filter(Boolean);
}

/** Where the header block ends (the index of the blank line's CRLFCRLF), or -1. */
export function headerEnd(buf: Buffer, from = 0): number {
  return buf.indexOf('\r\n\r\n', from, 'latin1');
}

/**
 * Parse one message from a datagram or a framed stream message. `streamed`: the body length is the
 * Content-Length, which must be present (RFC 3261 section 18.3); in a datagram it defaults to the rest.
 */
export function parseMessage(buf: Buffer, streamed = false): SipMessage {
  if (buf.length > MAX_MESSAGE_BYTES) throw new SipParseError('message too large');
  let start = 0;
  while (start < buf.length && (buf[start] === 0x0d || buf[start] === 0x0a)) start++;
  const end = headerEnd(buf, start);
  if (end < 0) throw new SipParseError('no end of headers');
  const head = buf.toString('latin1', start, end);
  const rawLines = head.split('\r\n');
  const first = rawLines[0];
  const lines: string[] = [];
  for (const l of rawLines.slice(1)) {
    if (l.length > MAX_HEADER_LINE) throw new SipParseError('header line too long');
    if ((l.startsWith(' ') || l.startsWith('\t')) && lines.length) lines[lines.length - 1] += ' ' + l.trim();
    else lines.push(l);
  }
  if (lines.length > MAX_HEADERS) throw new SipParseError('too many headers');
  const headers: Headers = [];
  let bad: string | undefined;
  for (const l of lines) {
    const colon = l.indexOf(':');
    const name = colon > 0 ? l.slice(0, colon).trim().toLowerCase() : '';
    if (!TOKEN.test(name)) {
      bad ??= 'malformed header line';
      continue;
    }
    const full = COMPACT[name] ?? name;
    const value = l.slice(colon + 1).trim();
    if (LIST_HEADERS.has(full)) for (const v of splitList(value)) headers.push([full, v]);
    else headers.push([full, value]);
  }
  const bodyStart = end + 4;
  const lengthText = header(headers, 'content-length');
  let bodyLength = buf.length - bodyStart;
  if (lengthText !== undefined) {
    if (!/^\d{1,6}$/.test(lengthText)) bad ??= 'bad Content-Length';
    else if (Number(lengthText) > buf.length - bodyStart) bad ??= 'body shorter than Content-Length';
    else bodyLength = Number(lengthText);
  } else if (streamed) bad ??= 'no Content-Length on a stream';
  const body = Buffer.from(buf.subarray(bodyStart, bodyStart + Math.max(0, bodyLength)));

  const status = STATUS_LINE.exec(first);
  if (status) {
    if (bad) throw new SipParseError(bad);
    const res: SipResponse = { kind: 'response', status: Number(status[1]), reason: status[2], headers, body };
    checkEssentials(res);
    return res;
  }
  const req = REQUEST_LINE.exec(first);
  if (!req) throw new SipParseError('bad start line');
  const request: SipRequest = { kind: 'request', method: req[1].toUpperCase(), uri: req[2], headers, body };
  const addressable = answerable(request);
  if (bad) throw new SipParseError(bad, addressable ? request : undefined);
  try {
    checkEssentials(request);
  } catch (e) {
    throw new SipParseError((e as Error).message, addressable ? request : undefined);
  }
  return request;
}

/** Whether a response can be built for the request at all (where it goes and which transaction). */
function answerable(m: SipRequest): boolean {
  try {
    parseVia(header(m.headers, 'via') ?? '');
    return ['from', 'to', 'call-id', 'cseq'].every((h) => header(m.headers, h) !== undefined);
  } catch {
    return false;
  }
}

function checkEssentials(m: SipMessage): void {
  for (const h of ['via', 'from', 'to', 'call-id', 'cseq']) {
    if (header(m.headers, h) === undefined) throw new SipParseError(`missing ${h}`);
  }
  const cseq = parseCSeq(header(m.headers, 'cseq')!);
  if (m.kind === 'request' && cseq.method !== m.method && !(m.method === 'ACK' && cseq.method === 'ACK')) {
    throw new SipParseError('CSeq method differs from the request method');
  }
  parseVia(header(m.headers, 'via')!);
  parseNameAddr(header(m.headers, 'from')!);
  parseNameAddr(header(m.headers, 'to')!);
  if (m.kind === 'request') parseUri(m.uri);
}

export function serialize(m: SipMessage): Buffer {
  const first = m.kind === 'request' ? `${m.method} ${m.uri} SIP/2.0` : `SIP/2.0 ${m.status} ${m.reason}`;
  const lines = [first];
  for (const [name, value] of m.headers) if (name !== 'content-length') lines.push(`${canonicalName(name)}: ${value}`);
  lines.push(`Content-Length: ${m.body.length}`);
  return Buffer.concat([Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1'), m.body]);
}

export function header(headers: Headers, name: string): string | undefined {
  for (const [n, v] of headers) if (n === name) return v;
  return undefined;
}

export function headerAll(headers: Headers, name: string): string[] {
  return headers.filter(([n]) => n === name).map(([, v]) => v);
}

export function setHeader(headers: Headers, name: string, value: string): void {
  const i = headers.findIndex(([n]) => n === name);
  if (i >= 0) {
    headers[i] = [name, value];
    for (let j = headers.length - 1; j > i; j--) if (headers[j][0] === name) headers.splice(j, 1);
  } else headers.push([name, value]);
}

export function removeHeader(headers: Headers, name: string): void {
  for (let j = headers.length - 1; j >= 0; j--) if (headers[j][0] === name) headers.splice(j, 1);
}

// ---- Header readers ----

export type Params = Record<string, string | null>;

/** `;a=b;c` after a value; quoted values keep their quotes removed. */
export function parseParams(text: string): Params {
  const params: Params = {};
  for (const part of text.split(';')) {
    const p = part.trim();
    if (!p) continue;
    const eq = p.indexOf('=');
    const name = (eq < 0 ? p : p.slice(0, eq)).trim().toLowerCase();
    if (!TOKEN.test(name)) throw new SipParseError('bad parameter');
    params[name] = eq < 0 ? null : unquote(p.slice(eq + 1).trim());
  }
  return params;
}

export function formatParams(params: Params): string {
  return Object.entries(params)
    .map(([k, v]) => (v === null ? `;${k}` : `;${k}=${v}`))
    .join('');
}

function unquote(s: string): string {
  return s.length >= 2 && s.startsWith('"') && s.endsWith('"') ? s.slice(1, -1).replace(/\\(.)/g, '$1') : s;
}

export interface SipUri {
  scheme: 'sip' | 'sips' | 'tel';
  user?: string;
  host: string;
  port?: number;
  params: Params;
}

const URI = /^(sips?):(?:([^@;?\s]+)@)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9\-.]+)(?::(\d{1,5}))?((?:;[^?\s]*)?)(?:\?\S*)?$/;

export function parseUri(text: string): SipUri {
  const t = text.trim();
  if (t.startsWith('tel:')) return { scheme: 'tel', user: t.slice(4).split(';')[0], host: '', params: {} };
  const m = URI.exec(t);
  if (!m) throw new SipParseError('bad URI');
  const port = m[4] === undefined ? undefined : Number(m[4]);
  if (port !== undefined && (port < 1 || port > 65535)) throw new SipParseError('bad URI port');
  const user = m[2]?.split(':')[0];
  return { scheme: m[1] as 'sip' | 'sips', user, host: m[3].replace(/^\[|\]$/g, ''), port, params: parseParams(m[5]) };
}

export function formatUri(u: SipUri): string {
  if (u.scheme === 'tel') return `tel:${u.user ?? ''}`;
  const host = u.host.includes(':') ? `[${u.host}]` : u.host;
  return `${u.scheme}:${u.user ? `${u.user}@` : ''}${host}${u.port ? `:${u.port}` : ''}${formatParams(u.params)}`;
}

export interface NameAddr {
  display?: string;
  uri: string;
  params: Params;
}

/** From, To, Contact, Refer-To, Route: `"Name" <uri>;params` or `uri;params`. */
export function parseNameAddr(text: string): NameAddr {
  const t = text.trim();
  const lt = t.indexOf('<');
  if (lt >= 0) {
    const gt = t.indexOf('>', lt);
    if (gt < 0) throw new SipParseError('unclosed <');
    const display = unquote(t.slice(0, lt).trim()) || undefined;
    const uri = t.slice(lt + 1, gt).trim();
    parseUri(uri);
    return { display, uri, params: parseParams(t.slice(gt + 1)) };
  }
  const semi = t.indexOf(';');
  const uri = semi < 0 ? t : t.slice(0, semi);
  parseUri(uri);
  return { uri, params: parseParams(semi < 0 ? '' : t.slice(semi)) };
}

export function formatNameAddr(a: NameAddr): string {
  const display = a.display ? `"${a.display.replace(/["\\]/g, '')}" ` : '';
  return `${display}<${a.uri}>${formatParams(a.params)}`;
}

export interface Via {
  transport: string;
  host: string;
  port?: number;
  params: Params;
}

const VIA = /^SIP\s*\/\s*2\.0\s*\/\s*([A-Za-z]+)\s+(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9\-.]+)(?:\s*:\s*(\d{1,5}))?\s*((?:;.*)?)$/;

export function parseVia(text: string): Via {
  const m = VIA.exec(text.trim());
  if (!m) throw new SipParseError('bad Via');
  return { transport: m[1].toUpperCase(), host: m[2].replace(/^\[|\]$/g, ''), port: m[3] ? Number(m[3]) : undefined, params: parseParams(m[4]) };
}

export function formatVia(v: Via): string {
  const host = v.host.includes(':') ? `[${v.host}]` : v.host;
  return `SIP/2.0/${v.transport} ${host}${v.port ? `:${v.port}` : ''}${formatParams(v.params)}`;
}

export function parseCSeq(text: string): { seq: number; method: string } {
  const m = /^(\d{1,10})\s+([A-Za-z0-9\-.!%*_+`'~]+)$/.exec(text.trim());
  if (!m || Number(m[1]) > 2 ** 31 - 1) throw new SipParseError('bad CSeq');
  return { seq: Number(m[1]), method: m[2].toUpperCase() };
}

/** `Digest a=b, c="d"` into its scheme and parameters. */
export function parseAuthorization(text: string): { scheme: string; params: Record<string, string> } {
  const t = text.trim();
  const space = t.indexOf(' ');
  if (space < 0) throw new SipParseError('bad authorization');
  const params: Record<string, string> = {};
  for (const part of splitList(t.slice(space + 1))) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new SipParseError('bad authorization parameter');
    params[part.slice(0, eq).trim().toLowerCase()] = unquote(part.slice(eq + 1).trim());
  }
  return { scheme: t.slice(0, space), params };
}

export function tagOf(nameAddr: string): string | undefined {
  return parseNameAddr(nameAddr).params.tag ?? undefined;
}

const REASONS: Record<number, string> = {
  100: 'Trying',
  180: 'Ringing',
  183: 'Session Progress',
  200: 'OK',
  202: 'Accepted',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  407: 'Proxy Authentication Required',
  408: 'Request Timeout',
  415: 'Unsupported Media Type',
  420: 'Bad Extension',
  422: 'Session Interval Too Small',
  480: 'Temporarily Unavailable',
  481: 'Call/Transaction Does Not Exist',
  486: 'Busy Here',
  487: 'Request Terminated',
  488: 'Not Acceptable Here',
  491: 'Request Pending',
  500: 'Server Internal Error',
  501: 'Not Implemented',
  503: 'Service Unavailable',
  603: 'Decline',
};

/** A To value with our tag added when it has none; an unreadable one (a 400's request) is copied as it is. */
function tagged(to: string, tag: string): string {
  try {
    const a = parseNameAddr(to);
    if (a.params.tag != null) return to;
    a.params.tag = tag;
    return formatNameAddr(a);
  } catch {
    return to;
  }
}

/**
 * A response to `req` (section 8.2.6): Via, From, Call-ID and CSeq copied, To copied with `toTag`
 * added when it has none.
 */
export function makeResponse(req: SipRequest, status: number, toTag?: string, extra: Headers = [], body: Buffer = Buffer.alloc(0)): SipResponse {
  const headers: Headers = [];
  for (const [n, v] of req.headers) {
    if (n === 'via' || n === 'from' || n === 'call-id' || n === 'cseq') headers.push([n, v]);
    else if (n === 'to') headers.push(['to', status > 100 && toTag ? tagged(v, toTag) : v]);
    else if (n === 'record-route' && status >= 200 && status < 300) headers.push([n, v]);
  }
  headers.push(...extra);
  return { kind: 'response', status, reason: reasonPhrase(status), headers, body };
}

/** The reason phrase we write after a status code. */
export function reasonPhrase(status: number): string {
  return REASONS[status] ?? 'Unknown';
}
