/** Where the dialler sends a trunk's outbound calls, with the password it answers the trunk's challenges with. */
import type { SecretBox } from '../crypto/secrets.js';
import { defaultPort } from './addresses.js';
import { passwordContext } from './service.js';
import type { SipTransport, SipTrunkStore } from './store.js';

/** In plaintext: never serialise, log or return it. */
export interface OutboundTermination {
  trunkId: string;
  workspaceId: string;
  /** A DNS name or an IP address (IPv6 without brackets). Resolve it through the outbound guard before sending. */
  host: string;
  port: number;
  transport: SipTransport;
  credentials: { username: string; password: string } | null;
  callerIdNumbers: string[];
}

export async function outboundTermination(store: SipTrunkStore, secrets: SecretBox, workspaceId: string, trunkId: string): Promise<OutboundTermination | null> {
  const t = await store.find(trunkId);
  if (!t || t.workspace_id !== workspaceId || !t.outbound || !t.outbound_host || !t.outbound_transport) return null;
  return {
    trunkId: t.id,
    workspaceId: t.workspace_id,
    host: t.outbound_host,
    port: t.outbound_port ?? defaultPort(t.outbound_transport),
    transport: t.outbound_transport,
    credentials:
      t.outbound_username && t.outbound_password
        ? { username: t.outbound_username, password: secrets.open(t.outbound_password, passwordContext(t.id, 'outbound')) }
        : null,
    callerIdNumbers: t.outbound_caller_ids,
  };
}
