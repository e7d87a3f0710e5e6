/**
 * The simulated carriers, one entry each: where on the sandbox server a carrier's REST API is served,
 * how its simulator is made, and the plug-in options that point the service's adapter at it. The
 * sandbox server (server.ts) routes, rings and shuts them down from this list alone, and src/sandbox/
 * index.ts starts the ones whose carrier has no API URL configured, so a new carrier's simulator is
 * its own files and one entry here.
 */
import { randomBytes } from 'node:crypto';
import type http from 'node:http';
import type { CarrierSettings, Provider } from '../../carriers/index.js';
import type { CarrierContext, RingInput } from './carrier.js';
import { createProviderA } from './provider-a.js';
import { createProviderB } from './provider-b.js';
import type { WebhookKey } from './signing.js';

/** A carrier's simulator on the sandbox server. */
export interface CarrierSimulator {
  /** A request under its path, with the path below it. */
  handle(req: http.IncomingMessage, res: http.ServerResponse, path: string, query: URLSearchParams): Promise<void>;
  /** Rings one of its numbers configured for inbound, as a person calling it. */
  ring(input: RingInput): Promise<{ callSid: string }>;
  shutdown(): void;
}

/** What the simulators share: the calls' context, and the key the sandbox signs webhooks with (Ed25519). */
export interface SimulatorContext {
  carrier: CarrierContext;
  webhookKey: WebhookKey;
}

export interface SimulatorEntry {
  provider: Provider;
  /** Its REST API's base path on the sandbox server (`/provider_b/v2`). */
  path: string;
  create(ctx: SimulatorContext): CarrierSimulator;
  /** The plug-in's options for a service using it, its API at `apiUrl`. */
  pluginOptions(apiUrl: string, ctx: SimulatorContext): NonNullable<CarrierSettings[Provider]>;
  /** A well-formed account of the carrier for an agent answering `phoneNumber` (its `<provider>_config`): the simulator takes any such. */
  agentConfig(phoneNumber: string): Record<string, unknown>;
}

const hex = (n: number) => randomBytes(n).toString('hex');

export const SIMULATORS: readonly SimulatorEntry[] = [
  {
    provider: 'provider_a',
    path: '/provider_a',
    create: (ctx) => createProviderA(ctx.carrier),
    pluginOptions: (apiUrl) => ({ apiUrl }),
    agentConfig: (phoneNumber) => ({ provider_a_config: { account_sid: `AC${hex(16)}`, auth_token: hex(16), phone_number: phoneNumber } }),
  },
  {
    provider: 'provider_b',
    path: '/provider_b/v2',
    create: (ctx) => createProviderB(ctx.carrier, ctx.webhookKey.privateKey),
    // Its webhooks are verified with the sandbox's key: it cannot sign with an agent's.
    pluginOptions: (apiUrl, ctx) => ({ apiUrl, verifyKeyOverride: ctx.webhookKey.publicKeyBase64 }),
    agentConfig: (phoneNumber) => ({
      provider_b_config: {
        api_key: `KEY${hex(12)}`,
        connection_id: String(Math.floor(Math.random() * 1e12)),
        phone_number: phoneNumber,
        public_key: randomBytes(32).toString('base64'),
      },
    }),
  },
];
