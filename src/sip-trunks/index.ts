/**
 * SIP trunks, assembled: the API's routes, the check agents' `sip_config` goes through, and what the
 * SIP stack and the dialler use:
 * - `authorizeInbound({sourceAddress, toNumber, digest?})`: the trunk and agent an INVITE reaches, or
 *   why not (`credentials_required`: challenge with 401, or 407 as a proxy, as the number's trunk asks
 *   when it wants digest credentials; `unknown_source`, `wrong_credentials` and `unknown_number`, the
 *   last only for a requester a trunk trusts: the same bare 403). See inbound-trust.ts for why no
 *   refusal tells a stranger which numbers exist.
 * - `outboundTermination(workspaceId, trunkId)`: host, port, transport, the decrypted credentials and
 *   the caller-id numbers of a trunk's outbound side; null when the workspace has no such trunk or it
 *   has no outbound side.
 */
import type { Knex } from 'knex';
import type { SecretBox } from '../crypto/secrets.js';
import type { Handlers } from '../contract/handlers.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import type { AgentService } from '../agents/service.js';
import { InboundTrust, type InboundDecision, type InboundRequest } from './inbound-trust.js';
import { sipTrunkRoutes } from './routes.js';
import { SipTrunkService } from './service.js';
import { SipTrunkStore } from './store.js';
import { outboundTermination, type OutboundTermination } from './termination.js';

export type { InboundDecision, InboundRefusal, InboundRequest, PresentedDigest } from './inbound-trust.js';
export type { OutboundTermination } from './termination.js';
export { SipTrunkService } from './service.js';

export interface SipTrunks {
  service: SipTrunkService;
  routes: Handlers;
  authorizeInbound(req: InboundRequest): Promise<InboundDecision>;
  outboundTermination(workspaceId: string, trunkId: string): Promise<OutboundTermination | null>;
}

/** Builds the room and registers its check of agents' `sip_config` with the agents domain. */
export function createSipTrunks(deps: { db: Knex; secrets: SecretBox; outbound: OutboundPolicy; agents: AgentService }): SipTrunks {
  const store = new SipTrunkStore(deps.db);
  const service = new SipTrunkService(store, deps.secrets, deps.outbound);
  deps.agents.useSipNumberCheck(service);
  const trust = new InboundTrust(store, deps.agents, deps.secrets);
  return {
    service,
    routes: sipTrunkRoutes(service),
    authorizeInbound: (req) => trust.authorizeInbound(req),
    outboundTermination: (workspaceId, trunkId) => outboundTermination(store, deps.secrets, workspaceId, trunkId),
  };
}
