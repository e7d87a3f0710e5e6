/**
 * The TwiML the service answers provider_a with, built by fast-xml-parser's XMLBuilder so every value
 * is escaped: connect the call to our media stream (values travel as `<Parameter>`s, since the stream
 * URL takes no query string), reject it as busy, hang it up, or dial the transfer number.
 */
import { XMLBuilder } from 'fast-xml-parser';

const builder = new XMLBuilder({ ignoreAttributes: false, attributeNamePrefix: '@_', suppressEmptyNode: true });
const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>';

function document(response: Record<string, unknown>): string {
  return DECLARATION + builder.build({ Response: response });
}

export function streamTwiml(streamUrl: string, parameters: Record<string, string>): string {
  return document({
    Connect: {
      Stream: {
        '@_url': streamUrl,
        Parameter: Object.entries(parameters).map(([name, value]) => ({ '@_name': name, '@_value': value })),
      },
    },
  });
}

export function rejectTwiml(reason: 'busy' | 'rejected'): string {
  return document({ Reject: { '@_reason': reason } });
}

export function hangupTwiml(): string {
  return document({ Hangup: '' });
}

export function dialTwiml(to: string): string {
  return document({ Dial: to });
}
