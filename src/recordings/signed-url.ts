/**
 * Recording links that work without an API key: HMAC-SHA256 over the conversation id and expiry with a
 * server secret. One signature for both kinds (a call's `call_` and a web session's `conv_` ids never
 * meet); the link's path is the kind's own download operation.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { RecordingKind } from './store.js';

/** Where a conversation's signed download lives. */
const DOWNLOAD_PATH: Record<RecordingKind, string> = {
  phone_call: '/api/v1/calls',
  web_session: '/api/v1/realtime/conversations',
};

export class RecordingLinks {
  constructor(
    private readonly key: Buffer,
    private readonly baseUrl: () => string,
    private readonly ttlS: number,
  ) {}

  private sign(conversationId: string, expires: number): string {
    return createHmac('sha256', this.key).update(`recording:${conversationId}:${expires}`).digest('hex');
  }

  url(conversationId: string, kind: RecordingKind, now: Date): string {
    const expires = Math.floor(now.getTime() / 1000) + this.ttlS;
    return `${this.baseUrl()}${DOWNLOAD_PATH[kind]}/${conversationId}/recording/download?expires=${expires}&signature=${this.sign(conversationId, expires)}`;
  }

  /** 'ok', or why the link does not work (a bad signature is told before an expiry, so a forged expiry learns nothing). */
  check(conversationId: string, expires: number, signature: string, now: Date): 'ok' | 'invalid' | 'expired' {
    const want = Buffer.from(this.sign(conversationId, expires), 'hex');
    const got = Buffer.from(signature, 'hex');
    if (got.length !== want.length || !timingSafeEqual(got, want)) return 'invalid';
    return now.getTime() / 1000 > expires ? 'expired' : 'ok';
  }
}
