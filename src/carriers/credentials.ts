/**
 * Carrier accounts from whatever holds an account's stored config (an agent, at runtime), read by
 * shape so this room needs nothing of the domains; each carrier's plug-in reads its own (its
 * `CredentialsSchema`). Plaintext: never log them.
 */
import type { CarrierCredentials, Provider } from './carrier.js';

/** What every carrier account of a holder says besides its secrets. */
export interface AccountState {
  phoneNumber?: string | null;
  inboundEnabled?: boolean;
  configured?: boolean;
}

/**
 * An account a holder keeps in its own config (an agent's `<provider>_config`), secrets opened: the
 * config's fields by their contract names, the number, whether inbound calls are on, whether it is
 * complete (every field of `AgentConfigSchema.requiredFields` and the number stored).
 */
export interface HeldAccount {
  readonly config: Readonly<Record<string, string>>;
  readonly phoneNumber: string | null;
  readonly inboundEnabled: boolean;
  readonly configured: boolean;
}

/**
 * Whatever holds carrier accounts (RuntimeAgent: `carrierAccounts` by provider, and SIP's binding);
 * each plug-in reads its own account from it by shape, so a new carrier's account needs no change here.
 */
export type CarrierAccounts = object;

/** The holder's account at `provider` kept in its config (`carrierAccounts`), if any. */
export function heldAccount(accounts: CarrierAccounts | null, provider: Provider): HeldAccount | null {
  return (accounts as { carrierAccounts?: Partial<Record<Provider, HeldAccount>> } | null)?.carrierAccounts?.[provider] ?? null;
}

/** One carrier's account of a holder: its number, whether inbound calls are on, whether it is complete. */
export interface CarrierAccount {
  configured: boolean;
  phoneNumber: string | null;
  inboundEnabled: boolean;
}

/**
 * A carrier account kept in an agent's own config (provider_a's, provider_b's): the agents room reads,
 * merges, seals and shows every such account from this alone (its `<provider>_config` input and its
 * `telephony.<provider>` status in the contract), so a new carrier needs no code there.
 */
export interface AgentConfigSchema {
  /** Fields of the config that are secrets: sealed at rest, opened only into `HeldAccount.config`, never shown. */
  readonly secretFields: readonly string[];
  /** Fields which, with the number, make the account complete (`telephony.<provider>.configured`). */
  readonly requiredFields: readonly string[];
}

/** How a carrier's account is read from a holder's accounts (each plug-in has one). */
export interface CredentialsSchema {
  /** The config fields dialling needs, and those inbound calls need, for messages (`account_sid and auth_token`). */
  readonly dialFields: string;
  readonly inboundFields: string;
  /** Set when the account is the agent's `<provider>_config`; absent for one held elsewhere (SIP's trunk binding). */
  readonly agentConfig?: AgentConfigSchema;
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
