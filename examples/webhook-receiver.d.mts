// Types of examples/webhook-receiver.mjs, for the tests that run it against real deliveries.
import type http from 'node:http';

export interface ReceivedEvent {
  id: string | undefined;
  event: Record<string, unknown>;
  verified: { spec: boolean; standard: boolean };
  headers: http.IncomingHttpHeaders;
}

export function verifySpecSignature(rawBody: Buffer, header: string | string[] | undefined, secrets: string[]): boolean;
export function verifyStandardSignature(rawBody: Buffer, headers: http.IncomingHttpHeaders, secrets: string[], nowSeconds?: number): boolean;
export function createWebhookReceiver(opts: {
  secrets: string[];
  onEvent?: (e: ReceivedEvent) => void;
  onRejected?: (r: { headers: http.IncomingHttpHeaders; reason: 'bad_signature' | 'missing_signature' }) => void;
  maxRemembered?: number;
}): http.Server;
