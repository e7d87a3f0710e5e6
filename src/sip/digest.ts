/**
 * HTTP Digest authentication as SIP uses it (RFC 3261 section 22, RFC 2617 with qop=auth, RFC 8760's
 * SHA-256 accepted from clients): the server side (challenges and checks) and the client side
 * (answering a 401/407). Written by hand on node:crypto: the npm helpers (`digest-header`) are
 * HTTP-client-only and do neither nonces nor the server side.
 *
 * Nonces are stateless to issue (a timestamp and random bytes, MACed with a key of this process) and
 * single use: a checked nonce is remembered until it expires and refused after (stale=true makes a
 * well-behaved client retry at once with a fresh one).
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export type DigestAlgorithm = 'MD5' | 'SHA-256';

function hash(algorithm: DigestAlgorithm, text: string): string {
  return createHash(algorithm === 'MD5' ? 'md5' : 'sha256')
    .update(text, 'utf8')
    .digest('hex');
}

export interface DigestResponseInput {
  algorithm: DigestAlgorithm;
  username: string;
  realm: string;
  password: string;
  method: string;
  uri: string;
  nonce: string;
  qop?: 'auth';
  nc?: string;
  cnonce?: string;
}

export function digestResponse(i: DigestResponseInput): string {
  const ha1 = hash(i.algorithm, `${i.username}:${i.realm}:${i.password}`);
  const ha2 = hash(i.algorithm, `${i.method}:${i.uri}`);
  return i.qop ? hash(i.algorithm, `${ha1}:${i.nonce}:${i.nc}:${i.cnonce}:${i.qop}:${ha2}`) : hash(i.algorithm, `${ha1}:${i.nonce}:${ha2}`);
}

const quote = (s: string) => `"${s.replace(/["\\]/g, '')}"`;

/** The Authorization (or Proxy-Authorization) value answering a challenge's parameters. */
export function answerChallenge(challenge: Record<string, string>, credentials: { username: string; password: string }, method: string, uri: string): string {
  const algorithm: DigestAlgorithm = /^sha-256$/i.test(challenge.algorithm ?? '') ? 'SHA-256' : 'MD5';
  const qops = (challenge.qop ?? '').split(',').map((q) => q.trim());
  const qop = qops.includes('auth') ? 'auth' : undefined;
  const nonce = challenge.nonce ?? '';
  const realm = challenge.realm ?? '';
  const cnonce = randomBytes(8).toString('hex');
  const nc = '00000001';
  const response = digestResponse({ algorithm, username: credentials.username, realm, password: credentials.password, method, uri, nonce, qop, nc, cnonce });
  const parts = [
    `username=${quote(credentials.username)}`,
    `realm=${quote(realm)}`,
    `nonce=${quote(nonce)}`,
    `uri=${quote(uri)}`,
    `response=${quote(response)}`,
    `algorithm=${algorithm}`,
  ];
  if (qop) parts.push(`qop=${qop}`, `nc=${nc}`, `cnonce=${quote(cnonce)}`);
  if (challenge.opaque !== undefined) parts.push(`opaque=${quote(challenge.opaque)}`);
  return `Digest ${parts.join(', ')}`;
}

export type DigestVerdict = 'ok' | 'stale' | 'wrong';

/** Issues nonces and checks answers to them. */
export class DigestServer {
  private readonly key = randomBytes(32);
  /** Nonces already answered, until they expire anyway (bounded: entries older than the lifetime go). */
  private readonly used = new Map<string, number>();

  constructor(
    private readonly nonceTtlMs: number,
    private readonly now: () => number = () => performance.timeOrigin + performance.now(),
    private readonly maxRemembered = 100_000,
  ) {}

  nonce(): string {
    const body = `${Math.floor(this.now())}.${randomBytes(9).toString('base64url')}`;
    return `${body}.${this.mac(body)}`;
  }

  private mac(body: string): string {
    return createHmac('sha256', this.key).update(body).digest('base64url').slice(0, 22);
  }

  challenge(realm: string, stale = false): string {
    return `Digest realm=${quote(realm)}, nonce=${quote(this.nonce())}, algorithm=MD5, qop="auth"${stale ? ', stale=true' : ''}`;
  }

  /** Whether a presented nonce is one of ours: fresh, stale (expired or already taken) or forged. */
  nonceState(nonce: string): 'fresh' | 'stale' | 'forged' {
    const [issued, rand, mac] = nonce.split('.');
    if (!issued || !rand || !mac || !safeEqual(mac, this.mac(`${issued}.${rand}`))) return 'forged';
    return this.now() - Number(issued) > this.nonceTtlMs || this.used.has(nonce) ? 'stale' : 'fresh';
  }

  /** Whether the parameters' response is the one `password` gives in `realm` (nothing about the nonce's age). */
  responseMatches(params: Record<string, string>, method: string, realm: string, password: string): boolean {
    if (params.realm !== realm || !params.uri || !params.response || !params.nonce) return false;
    if (params.algorithm && !/^(md5|sha-256)$/i.test(params.algorithm)) return false;
    if (params.qop && params.qop !== 'auth') return false;
    const expected = digestResponse({
      algorithm: /^sha-256$/i.test(params.algorithm ?? 'MD5') ? 'SHA-256' : 'MD5',
      username: params.username ?? '',
      realm,
      password,
      method,
      uri: params.uri,
      nonce: params.nonce,
      qop: params.qop ? 'auth' : undefined,
      nc: params.nc,
      cnonce: params.cnonce,
    });
    return safeEqual(expected, params.response.toLowerCase());
  }

  /** A nonce answered rightly is not taken again. */
  markUsed(nonce: string): void {
    this.remember(nonce, Number(nonce.split('.')[0]), this.now());
  }

  /** Check an Authorization's parameters against `password` (already looked up for its username). */
  verify(params: Record<string, string>, method: string, realm: string, password: string): DigestVerdict {
    const nonce = params.nonce ?? '';
    const state = this.nonceState(nonce);
    if (state === 'forged' || !this.responseMatches(params, method, realm, password)) return 'wrong';
    if (state === 'stale') return 'stale';
    this.markUsed(nonce);
    return 'ok';
  }

  private remember(nonce: string, issued: number, now: number): void {
    for (const [n, at] of this.used) {
      if (now - at <= this.nonceTtlMs && this.used.size < this.maxRemembered) break;
      this.used.delete(n);
    }
    this.used.set(nonce, issued);
  }
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
