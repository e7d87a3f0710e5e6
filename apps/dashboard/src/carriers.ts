/**
 * The carriers, as the contract names them (generated/carriers.ts, from openapi/carriers/ by
 * `npm run generate`): every list of carriers in the dashboard comes from here, so a new carrier shows
 * up without an edit to a page.
 */
import { carriers } from '../../../generated/carriers.js';

export type Carrier = (typeof carriers)[number];
export type ProviderId = Carrier['provider'];

/** Every carrier, in the order the API lists them. */
export const CARRIERS: readonly Carrier[] = carriers;

/** A carrier whose account is the agent's own: credentials and a number, inbound turned on and off per agent. */
export type AccountCarrier = Extract<Carrier, { account: readonly unknown[] }>;

export const ACCOUNT_CARRIERS = carriers.filter((c): c is AccountCarrier => c.account !== null);

const ACRONYMS: Record<string, string> = { sid: 'SID', id: 'ID', api: 'API', url: 'URL' };

/** A field's label from its contract name: `account_sid` -> "Account SID", `api_key` -> "API key". */
export function fieldLabel(name: string): string {
  const words = name.split('_').map((w) => ACRONYMS[w] ?? w);
  return [words[0]!.charAt(0).toUpperCase() + words[0]!.slice(1), ...words.slice(1)].join(' ');
}
