/**
 * Whether an INVITE may reach an agent: the decision the SIP stack asks for before it answers one.
 *
 * A public SIP port is scanned for toll fraud from the first hour, so the answer to a stranger never
 * depends on which numbers exist. The number's trunk decides first: the request is let in when that
 * trunk trusts it (its source list, its digest credentials, or both when it has both), and challenged
 * when it carries no digest and that trunk would take it with one (the trunk wants credentials and
 * lists this source or no source at all), whatever another trunk trusts the source for. A stranger
 * learns nothing from that challenge: only a trunk without a source list challenges a source it does
 * not list, and while such a trunk exists every stranger is challenged for every number (below).
 * Otherwise the refusal is decided by who is asking, never by the number:
 * - a requester some trunk trusts (by its source, or by a digest that verifies against it), asking for
 *   a number that is not that trunk's to deliver: `unknown_number` (an authenticated peer may learn it);
 * - a request without a digest that some trunk could trust with one (its source is listed by a trunk
 *   that also wants credentials, or some trunk takes calls from any source with credentials):
 *   `credentials_required` (the stack challenges: 401, or 407 as a proxy);
 * - a request whose digest verifies against no trunk: `wrong_credentials` (403);
 * - anything else: `unknown_source` (403).
 * A number the trusted trunk delivers but no agent answers is `unknown_number` too.
 *
 * Digest arithmetic (RFC 8760, nonces, their expiry and single use) is the stack's: it passes what the
 * INVITE presented as `digest`, a username and a `matches(password)` that computes the expected
 * response for that password. Passwords are opened here and go no further than `matches`.
 */
import type { SecretBox } from '../crypto/secrets.js';
import type { AgentService, RuntimeAgent } from '../agents/service.js';
import { normaliseSourceAddress } from './addresses.js';
import { passwordContext } from './service.js';
import type { InboundTrunk, SipTrunkStore } from './store.js';

/** The Authorization (or Proxy-Authorization) an INVITE presented, as the stack checks it. */
export interface PresentedDigest {
  username: string;
  /** Whether the presented response is the one `password` gives for the stack's nonce, realm, method and URI. */
  matches(password: string): boolean;
}

export interface InboundRequest {
  /** The address the INVITE came from (the packet's or connection's source, not a header). */
  sourceAddress: string;
  /** The called number: E.164, with or without the `+` (the user part of the Request-URI). */
  toNumber: string;
  digest?: PresentedDigest;
}

export type InboundRefusal = 'unknown_source' | 'credentials_required' | 'wrong_credentials' | 'unknown_number';

export type InboundDecision =
  { allowed: true; trunk: { id: string; workspaceId: string; name: string }; number: string; agent: RuntimeAgent } | { allowed: false; reason: InboundRefusal };

const refuse = (reason: InboundRefusal): InboundDecision => ({ allowed: false, reason });

/** `+14155550140` from `+14155550140` or `14155550140`; null for anything else (it matches no number). */
function e164(raw: string): string | null {
  const m = /^\+?([1-9][0-9]{1,14})$/.exec(raw);
  return m ? `+${m[1]}` : null;
}

export class InboundTrust {
  constructor(
    private readonly store: SipTrunkStore,
    private readonly agents: AgentService,
    private readonly secrets: SecretBox,
  ) {}

  /** Whether `trunk` trusts the request on its own terms: its source list and its credentials. */
  private trusts(trunk: InboundTrunk, digest: PresentedDigest | undefined): boolean {
    if (trunk.restricted && !trunk.source_allowed) return false;
    if (trunk.inbound_username === null) return true;
    if (!digest || digest.username !== trunk.inbound_username || trunk.inbound_password === null) return false;
    return digest.matches(this.secrets.open(trunk.inbound_password, passwordContext(trunk.id, 'inbound')));
  }

  /** Whether `trunk` would trust this source once it presents the trunk's credentials. */
  private wouldTrustWithDigest(trunk: InboundTrunk): boolean {
    return trunk.inbound_username !== null && (!trunk.restricted || trunk.source_allowed);
  }

  async authorizeInbound(req: InboundRequest): Promise<InboundDecision> {
    const source = normaliseSourceAddress(req.sourceAddress);
    if (source === null) return refuse('unknown_source');
    const number = e164(req.toNumber);
    const trunk = number === null ? undefined : await this.store.inboundTrunkFor(number, source);
    if (trunk && number !== null && this.trusts(trunk, req.digest)) {
      const agent = await this.agents.sipInboundAgent(trunk.id, number);
      if (!agent) return refuse('unknown_number');
      return { allowed: true, trunk: { id: trunk.id, workspaceId: trunk.workspace_id, name: trunk.name }, number, agent };
    }
    if (trunk && !req.digest && this.wouldTrustWithDigest(trunk)) return refuse('credentials_required');
    const peers = await this.store.peersOf(source, req.digest?.username ?? null);
    if (peers.some((p) => this.trusts(p, req.digest))) return refuse('unknown_number');
    if (req.digest) return refuse('wrong_credentials');
    const wantsCredentials = peers.some((p) => p.inbound_username !== null) || (await this.store.anyDigestOnlyTrunk());
    return refuse(wantsCredentials ? 'credentials_required' : 'unknown_source');
  }
}
