/**
 * provider_b's Call Control webhooks (Telnyx-style, PROTOCOLS.md): one JSON event per request, signed
 * Ed25519 over `{timestamp}|{body}` with the account's key, 300 s window. The call is known by the
 * `client_state` we set (our call id) or its call_control_id; an incoming call by the number called.
 * Events may be delivered twice (their `id` says so). Replies are Call Control commands (answer with
 * our media stream, reject busy); the HTTP answer is always empty.
 */
import type { KeyObject } from 'node:crypto';
import type { CallbackAction, CallbackReply, CallbackRequest, CarrierCallbacks, CarrierEvent, CarrierMessage } from '../callbacks.js';
import type { CarrierAccounts } from '../credentials.js';
import { obj, str } from '../media.js';
import { providerBAccount, providerBCredentials } from './credentials.js';
import { decodeClientState, type ProviderBCarrier } from './rest.js';
import { publicKeyFromBase64, SIGNATURE_HEADER, TIMESTAMP_HEADER, verifyProviderBSignature } from './signature.js';
import { providerBAnsweredBy, providerBHangup } from './status.js';

export const EVENT = 'providerBEvent';

function body(raw: string): { type: string; id: string; payload: Record<string, unknown> } {
  let data: Record<string, unknown> | null = null;
  try {
    data = obj(obj(JSON.parse(raw))?.data);
  } catch {
    /* not JSON: an event of no call, refused by its signature */
  }
  return { type: str(data?.event_type) ?? '', id: str(data?.id) ?? '', payload: obj(data?.payload) ?? {} };
}

function translate(type: string, payload: Record<string, unknown>, incoming: boolean): CarrierEvent {
  if (incoming) return { kind: 'incoming', from: String(payload.from ?? ''), to: String(payload.to ?? '') };
  switch (type) {
    case 'call.initiated':
      return { kind: 'progress', status: 'initiated' };
    case 'call.answered':
      return { kind: 'progress', status: 'in_progress' };
    case 'call.machine.detection.ended':
      return { kind: 'answered_by', answeredBy: providerBAnsweredBy(str(payload.result)), greetingEnded: false };
    case 'call.machine.greeting.ended':
      return { kind: 'greeting_ended' };
    case 'call.hangup': {
      const cause = str(payload.hangup_cause);
      return { kind: 'ended', outcome: providerBHangup(cause, false), whenAnswered: providerBHangup(cause, true) };
    }
    default:
      return { kind: 'noted' };
  }
}

function credentials(accounts: CarrierAccounts | null) {
  const c = accounts && providerBCredentials.credentials(accounts);
  if (!c) throw new Error('provider_b reply without the account answering the number');
  return c;
}

export function providerBCallbacks(carrier: ProviderBCarrier, verifyKeyOverride: string | null): CarrierCallbacks {
  const keysOf = (accounts: CarrierAccounts | null): KeyObject[] => {
    const key = verifyKeyOverride ?? providerBAccount(accounts)?.publicKey;
    const imported = key ? publicKeyFromBase64(key) : null;
    return imported ? [imported] : [];
  };
  return {
    operations: [EVENT],

    read(_operation: string, req: CallbackRequest): CarrierMessage {
      const { type, id, payload } = body(req.rawBody);
      const state = decodeClientState(payload.client_state);
      const maybeIncoming = type === 'call.initiated' && payload.direction === 'incoming';
      return {
        call: { callId: state?.call_id ?? null, callSid: String(payload.call_control_id ?? '') },
        number: maybeIncoming && typeof payload.to === 'string' ? { to: payload.to, always: false } : null,
        eventId: id,
        seq: null,
        verify(accounts, nowS) {
          const keys = keysOf(accounts);
          if (!keys.length) return 'invalid_signature';
          return verifyProviderBSignature(keys, req.rawBody, req.header(SIGNATURE_HEADER), req.header(TIMESTAMP_HEADER), nowS);
        },
        event: (known) => translate(type, payload, maybeIncoming && !known),
      };
    },

    async reply(_operation: string, action: CallbackAction, { accounts, callSid }): Promise<CallbackReply> {
      if (action.kind === 'connect') await carrier.answer(credentials(accounts), callSid, { call_id: action.callId, stream_token: action.streamToken });
      else if (action.kind === 'reject') await carrier.reject(credentials(accounts), callSid);
      else if (action.kind === 'hangup') await carrier.hangup(credentials(accounts), callSid);
      return { status: 204 };
    },
  };
}
