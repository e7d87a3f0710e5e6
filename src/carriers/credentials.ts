/**
 * Carrier accounts from whatever holds an account's stored config (an agent, at runtime), read by
 * shape so this room needs nothing of the domains; each carrier's plug-in reads its own (its
 * `CredentialsSchema`). Plaintext: never log them.
 */
import type { CarrierCredentials } from './carrier.js';

/** What every carrier account of a holder says besides its secrets. */
export interface AccountState {
  phoneNumber?: string | null;
  inboundEnabled?: boolean;
  configured?: boolean;
}

/**
 * Whatever holds carrier accounts (RuntimeAgent: `providerA`, `providerB`); each plug-in reads its own
 * account from it by shape, so a new carrier's account needs no change here.
 */
export type CarrierAccounts = object;

/** One carrier's account of a holder: its number, whether inbound calls are on, whether it is complete. */
export interface CarrierAccount {
  configured: boolean;
  phoneNumber: string | null;
  inboundEnabled: boolean;
}

/** How a carrier's account is read from a holder's accounts (each plug-in has one). */
export interface CredentialsSchema {
  /** The config fields dialling needs, and those inbound calls need, for messages (`account_sid and auth_token`). */
  readonly dialFields: string;
  readonly inboundFields: string;
  /** The holder's account at this carrier, if any. */
  account(accounts: CarrierAccounts): CarrierAccount | null;
  /** The credentials to call the carrier with; null when the account lacks them. */
  credentials(accounts: CarrierAccounts): CarrierCredentials | null;
}

export class MissingCredentialsError extends Error {}

/** An account's state as the plug-ins report it. */
export function accountState(a: AccountState | null | undefined): CarrierAccount | null {
  return a ? { configured: Boolean(a.configured), phoneNumber: a.phoneNumber ?? null, inboundEnabled: Boolean(a.inboundEnabled) } : null;
}
