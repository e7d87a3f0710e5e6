/** Agents in PostgreSQL. Provider credentials arrive here already sealed; the store never sees plaintext. */
import type { Knex } from 'knex';
import { conflict, unprocessable } from '../errors/api-error.js';
import { isForeignKeyViolation, isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type PageParams } from '../lib/pagination.js';

export interface ProviderAStored {
  account_sid?: string;
  /** Sealed. */
  auth_token?: string;
}
export interface ProviderBStored {
  /** Sealed. */
  api_key?: string;
  connection_id?: string;
  account_sid?: string;
  /** Sealed. */
  public_key?: string;
}
export interface VoicemailStored {
  enabled: boolean;
  message: string | null;
  detection_timeout_seconds: number | null;
  retry_on_voicemail: boolean;
}

/** An agent's `analysis` setting (AgentAnalysis in the contract); copied onto each conversation as it starts. */
export interface AnalysisStored {
  /** JSON Schema (2020-12) of the data to extract; checked on write (analysis-schema.ts). */
  schema: Record<string, unknown> | null;
  success_criteria: string | null;
}

/** One of an agent's transfer destinations (TransferDestination in the contract). */
export interface TransferDestinationStored {
  name: string;
  phone_number: string;
  description: string;
}

export interface AgentRow {
  id: string;
  workspace_id: string;
  name: string;
  description: string;
  instruction: string;
  first_message: string;
  voice_id: string | null;
  language: string | null;
  language_code: string | null;
  accent: string | null;
  can_end_conversation: boolean;
  transfer_phone_number: string | null;
  transfer_criteria: string | null;
  transfer_destinations: TransferDestinationStored[];
  /** Per-caller setup of inbound calls (AgentInboundSetup in the contract). */
  inbound_setup: { url: string } | null;
  recording_enabled: boolean;
  opt_out_enabled: boolean;
  recording_disclosure: string | null;
  variable_placeholders: Record<string, string>;
  voicemail_config: VoicemailStored | null;
  provider_a_config: ProviderAStored | null;
  provider_a_phone_number: string | null;
  provider_a_inbound_enabled: boolean;
  provider_b_config: ProviderBStored | null;
  provider_b_phone_number: string | null;
  provider_b_inbound_enabled: boolean;
  /** The SIP trunk number the agent answers (both set or both null; migration 034's foreign key). */
  sip_trunk_id: string | null;
  sip_phone_number: string | null;
  enable_webcam: boolean;
  enable_screen_share: boolean;
  analysis: AnalysisStored | null;
  created_at: Date;
  updated_at: Date;
}

export type AgentValues = Omit<AgentRow, 'id' | 'workspace_id' | 'created_at' | 'updated_at'>;

const JSON_COLUMNS = [
  'variable_placeholders',
  'voicemail_config',
  'provider_a_config',
  'provider_b_config',
  'analysis',
  'transfer_destinations',
  'inbound_setup',
] as const;

/** knex/pg would send a JS object as-is and a JS array wrongly; jsonb columns get JSON text. */
function encode(values: Partial<AgentValues>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...values };
  for (const c of JSON_COLUMNS) if (c in out) out[c] = out[c] === null ? null : JSON.stringify(out[c]);
  return out;
}

/**
 * A SIP binding the database refused, as the API's error: another agent answers the number (unique
 * index), or the trunk no longer delivers it (foreign key; the service checked it before, so this is a
 * change that raced the write). Anything else is rethrown.
 */
function sipBindingError(err: unknown, values: Partial<AgentValues>): unknown {
  if (isUniqueViolation(err, 'agents_sip_inbound_number'))
    return conflict(
      'phone_number_in_use',
      `Another agent already answers inbound calls on ${values.sip_phone_number} through its SIP trunk.`,
      'sip_config.phone_number',
    );
  if (isForeignKeyViolation(err, 'agents_sip_number_fk'))
    return unprocessable(
      'sip_number_not_on_trunk',
      `The SIP trunk ${values.sip_trunk_id} does not deliver ${values.sip_phone_number}.`,
      'sip_config.phone_number',
    );
  return err;
}

export class AgentStore {
  constructor(private readonly db: Knex) {}

  async insert(row: { id: string; workspace_id: string } & AgentValues): Promise<AgentRow> {
    try {
      const [created] = await this.db('agents').insert(encode(row)).returning('*');
      return created;
    } catch (err) {
      throw sipBindingError(err, row);
    }
  }

  /** By id alone, so callers can tell "another workspace's" (403) from "none" (404). */
  find(id: string, trx: Knex = this.db): Promise<AgentRow | undefined> {
    return trx('agents').where({ id }).first();
  }

  /** Only the columns of the public profile: nothing else of the agent leaves the database for it. */
  findPublic(id: string): Promise<Pick<AgentRow, 'id' | 'name' | 'enable_webcam' | 'enable_screen_share'> | undefined> {
    return this.db('agents').where({ id }).first('id', 'name', 'enable_webcam', 'enable_screen_share');
  }

  findForUpdate(trx: Knex.Transaction, id: string): Promise<AgentRow | undefined> {
    return trx('agents').where({ id }).forUpdate().first();
  }

  async update(trx: Knex, id: string, values: Partial<AgentValues>): Promise<AgentRow> {
    try {
      const [row] = await trx('agents')
        .where({ id })
        .update({ ...encode(values), updated_at: trx.fn.now() })
        .returning('*');
      return row;
    } catch (err) {
      throw sipBindingError(err, values);
    }
  }

  async delete(workspaceId: string, id: string): Promise<void> {
    await this.db('agents').where({ id, workspace_id: workspaceId }).delete();
  }

  list(workspaceId: string, params: PageParams) {
    return paginate<AgentRow, AgentRow>(this.db('agents').where({ workspace_id: workspaceId }).select('*'), params, (r) => r);
  }

  /** The agent answering inbound calls to `phoneNumber` at `provider`, if any (at most one: a unique index). */
  findInbound(provider: 'provider_a' | 'provider_b', phoneNumber: string): Promise<AgentRow | undefined> {
    return this.db('agents')
      .where({ [`${provider}_phone_number`]: phoneNumber, [`${provider}_inbound_enabled`]: true })
      .first();
  }

  /** The agent answering inbound SIP calls to `phoneNumber` through `trunkId`, if any (at most one: a unique index). */
  findSipInbound(trunkId: string, phoneNumber: string): Promise<AgentRow | undefined> {
    return this.db('agents').where({ sip_trunk_id: trunkId, sip_phone_number: phoneNumber }).first();
  }

  /** Sets inbound on or off when the number is still `phoneNumber`; a unique violation means another agent answers it. */
  async setInbound(
    workspaceId: string,
    id: string,
    provider: 'provider_a' | 'provider_b',
    phoneNumber: string,
    enabled: boolean,
  ): Promise<AgentRow | undefined> {
    const [row] = await this.db('agents')
      .where({ id, workspace_id: workspaceId, [`${provider}_phone_number`]: phoneNumber })
      .update({ [`${provider}_inbound_enabled`]: enabled, updated_at: this.db.fn.now() })
      .returning('*');
    return row;
  }

  transaction<T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }
}
