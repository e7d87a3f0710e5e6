/**
 * provider_a's callbacks (Twilio-style, PROTOCOLS.md): the voice webhook (connect an answered call to
 * our media stream, or an incoming one), the status callback and the answering-machine callback, all
 * form-encoded and signed by `X-Twilio-Signature` with the account's auth token over the URL as
 * called. Outbound calls carry our call id in each callback URL's query; an incoming call is known by
 * its CallSid and the number called. Replies to the voice webhook are TwiML.
 */
import { randomBytes } from 'node:crypto';
import type { CallbackUrls } from '../carrier.js';
import type { CallbackAction, CallbackReply, CallbackRequest, CarrierCallbacks, CarrierEvent, CarrierMessage } from '../callbacks.js';
import { providerAAccount } from './credentials.js';
import { verifyProviderASignature, type FormParams } from './signature.js';
import { providerAAnsweredBy, providerAStatus } from './status.js';
import { hangupTwiml, rejectTwiml, streamTwiml } from './twiml.js';

export const VOICE = 'providerAVoiceWebhook';
export const STATUS = 'providerAStatusCallback';
export const AMD = 'providerAAmdCallback';

/** The key a request with no account to check it against is checked with (it never verifies, in the same time). */
const UNKNOWN_KEY = randomBytes(32).toString('hex');

/** Form parameters as sent, repeated names kept in order (not qs's nested objects). */
export function formParams(raw: string): FormParams {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(raw)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

const one = (p: FormParams, name: string): string => {
  const v = p[name];
  return Array.isArray(v) ? (v[0] ?? '') : (v ?? '');
};

function statusEvent(value: string): CarrierEvent {
  const mapped = providerAStatus(value);
  if (!mapped) return { kind: 'noted' };
  return mapped.kind === 'progress' ? mapped : { kind: 'ended', outcome: mapped.outcome, whenAnswered: mapped.outcome };
}

export function providerACallbacks(urls: CallbackUrls): CarrierCallbacks {
  return {
    operations: [VOICE, STATUS, AMD],

    read(operation: string, req: CallbackRequest): CarrierMessage {
      const params = formParams(req.rawBody);
      const callSid = one(params, 'CallSid');
      // The voice webhook of an incoming call: no call id of ours, and the number's account signs it.
      const incoming = operation === VOICE && one(params, 'Direction') === 'inbound' && req.callId === undefined;
      const seq = operation === STATUS ? Number(one(params, 'SequenceNumber')) : NaN;
      return {
        call: { callId: req.callId ?? null, callSid },
        number: incoming ? { to: one(params, 'To'), always: true } : null,
        eventId: null,
        seq: Number.isFinite(seq) ? seq : null,
        // The account must be the agent's and the signature its token's.
        verify(accounts) {
          const a = providerAAccount(accounts);
          const signed = verifyProviderASignature(a?.authToken ?? UNKNOWN_KEY, `${urls.base()}${req.url}`, params, req.header('X-Twilio-Signature'));
          return a?.authToken && a.accountSid === one(params, 'AccountSid') && signed ? 'ok' : 'invalid_signature';
        },
        event(): CarrierEvent {
          if (operation === VOICE) return incoming ? { kind: 'incoming', from: one(params, 'From'), to: one(params, 'To') } : { kind: 'media_wanted' };
          if (operation === AMD) return { kind: 'answered_by', ...providerAAnsweredBy(one(params, 'AnsweredBy')) };
          return statusEvent(one(params, 'CallStatus'));
        },
      };
    },

    async reply(operation: string, action: CallbackAction): Promise<CallbackReply> {
      if (operation !== VOICE) return { status: 204 };
      const twiml = (body: string): CallbackReply => ({ status: 200, body, type: 'text/xml' });
      if (action.kind === 'connect') return twiml(streamTwiml(urls.media('provider_a'), { call_id: action.callId, stream_token: action.streamToken }));
      if (action.kind === 'reject') return twiml(rejectTwiml('busy'));
      return twiml(hangupTwiml());
    },
  };
}
