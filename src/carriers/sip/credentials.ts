/**
 * provider `sip`'s account of an agent: its `sip_config` binding (a SIP trunk of the workspace and a
 * number the trunk delivers). Calls go out through that trunk's termination, and the binding itself
 * is what lets inbound calls to the number in (there is nothing to point at the trunk).
 */
import type { CarrierCredentials } from '../carrier.js';
import type { CarrierAccounts, CredentialsSchema } from '../credentials.js';

export interface SipCredentials extends CarrierCredentials {
  provider: 'sip';
  workspaceId: string;
  trunkId: string;
}

/** The holder's binding (RuntimeAgent's `sip` and `workspaceId`), read by shape. */
export function sipBinding(accounts: CarrierAccounts | null): { workspaceId: string; trunkId: string; phoneNumber: string } | null {
  const a = accounts as { workspaceId?: string; sip?: { trunkId: string; phoneNumber: string } | null } | null;
  return a?.sip && a.workspaceId ? { workspaceId: a.workspaceId, ...a.sip } : null;
}

export const sipCredentials: CredentialsSchema = {
  dialFields: 'sip_config',
  inboundFields: 'sip_config',
  account(accounts) {
    const b = sipBinding(accounts);
    return b ? { configured: true, phoneNumber: b.phoneNumber, inboundEnabled: true } : null;
  },
  credentials(accounts): SipCredentials | null {
    const b = sipBinding(accounts);
    return b ? { provider: 'sip', workspaceId: b.workspaceId, trunkId: b.trunkId } : null;
  },
};
