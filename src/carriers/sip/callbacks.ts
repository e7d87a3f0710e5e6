/**
 * provider `sip`'s callbacks: none over HTTP. Its messages come from the user agent (line.ts) and its
 * replies become SIP: `connect` answers an inbound call (200 with our SDP) and starts the call's
 * media stream, `reject` is 486 Busy Here, `hangup` a BYE, CANCEL or 480.
 */
import type { CallbackAction, CallbackReply, CarrierCallbacks, CarrierMessage } from '../callbacks.js';
import type { SipLine } from './line.js';

export function sipCallbacks(line: SipLine): CarrierCallbacks {
  return {
    operations: [],
    read(operation: string): CarrierMessage {
      throw new Error(`provider sip has no HTTP callback ${operation}`);
    },
    async reply(_operation: string, action: CallbackAction, ctx: { callSid: string }): Promise<CallbackReply> {
      await line.act(ctx.callSid, action);
      return { status: 204 };
    },
  };
}
