/** Agents in PostgreSQL. Provider credentials arrive here already sealed; the store never sees plaintext. */
import type { Knex } from 'knex';
import { conflict, unprocessable } from '../errors/api-error.js';
import { isForeignKeyViolation, isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type PageParams } from '../lib/pagination.js';
import type { RedactionSetting } from '../redaction/setting.js';
import type { ConversationSettings } from '../voice/conversation-settings.js';

/**
 * An agent's account at a carrier whose account is the agent's `<provider>_config` (migration 041):
 * the config's fields (the carrier's `secretFields` sealed), the number, whether inbound calls are on.
 * Members left out are null (false).
 */
export interface CarrierAccountStored {
  config?: Record<string, string> | null;
  phone_number?: string | null;
  inbound_enabled?: boolean;
}

/** By provider; a provider with nothing stored has no key. */
export type CarrierAccountsStored = Partial<Record<string, CarrierAccountStored>>;
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
  /** Exactly one of the two targets; rows saved before SIP URIs have no `sip_uri` (read as null). */
  phone_number: string | null;
  sip_uri?: string | null;
  description: string;
}

/** A destination calls can transfer to today: a number (SIP URI targets are saved but not offered yet). */
export type PhoneTransferDestination = { name: string; phone_number: string; description: string };

export interface AgentRow {
  id: string;
  workspace_id: string;
  name: string;
  description: string;
  instruction: string;
  first_message: string;
  model: string | null;
  voice_id: string | null;
  /** The post-call analysis model; null: the service's `VOICE_ANALYSIS_MODEL`. */
  analysis_model: string | null;
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
  carrier_accounts: CarrierAccountsStored;
  /** The SIP trunk number the agent answers (both set or both null; migration 034's foreign key). */
  sip_trunk_id: string | null;
  sip_phone_number: string | null;
  enable_webcam: boolean;
  enable_screen_share: boolean;
  analysis: AnalysisStored | null;
  /** What the agent's conversations redact and where; copied onto each conversation as it starts. */
  redaction: RedactionSetting | null;
  /** How the agent's conversations flow (src/conversation/settings.ts); null: every default. */
  conversation: ConversationSettings | null;
  /** The newest version (what the row holds); every write makes the next (migration 044). */
  draft_version: number;
  /** The version new conversations run. */
  published_version: number;
  /** Every write publishes the version it makes. */
  auto_publish: boolean;
  created_at: Date;
  updated_at: Date;
}

/** The row's configuration: what a version holds. */
export type AgentValues = Omit<AgentRow, 'id' | 'workspace_id' | 'created_at' | 'updated_at' | 'draft_version' | 'published_version' | 'auto_publish'>;

/**
 * What a version links (migration 048): the ids of its tools, agent documents (`adoc_`) and MCP
 * servers, each sorted. As read, a tool or MCP server deleted since is left out (deleting one removes
 * it from every version); an agent document lives as long as the agent.
 */
export interface AgentLinks {
  tool_ids: string[];
  document_ids: string[];
  mcp_server_ids: string[];
}

/** One stored version (agent_versions): the configuration the write that made it left. */
export interface AgentVersionRow {
  workspace_id: string;
  agent_id: string;
  version: number;
  config: AgentValues;
  links: AgentLinks;
  created_at: Date;
  published_at: Date | null;
}

/** Columns of `agents` that are not configuration, so not part of a version (migration 044). */
const NOT_CONFIG = new Set(['id', 'workspace_id', 'created_at', 'updated_at', 'draft_version', 'published_version', 'auto_publish']);

/** The configuration of a row, as a version keeps it. */
function configOf(row: AgentRow): AgentValues {
  return Object.fromEntries(Object.entries(row).filter(([k]) => !NOT_CONFIG.has(k))) as AgentValues;
}

const JSON_COLUMNS = [
  'variable_placeholders',
  'voicemail_config',
  'carrier_accounts',
  'analysis',
  'redaction',
  'conversation',
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

/**
 * The draft's links as the link tables hold them, as one jsonb value (bindings: the agent id three
 * times). Read in the write's transaction: every link write holds the agent's row lock, as every
 * other write does, so a version's links and configuration are the same moment's.
 */
const DRAFT_LINKS = `jsonb_build_object(
  'tool_ids', coalesce((select jsonb_agg(x.tool_id order by x.tool_id) from agent_tools x where x.agent_id = ?), '[]'::jsonb),
  'document_ids', coalesce((select jsonb_agg(d.id order by d.id) from agent_documents d where d.agent_id = ? and d.detached_at is null), '[]'::jsonb),
  'mcp_server_ids', coalesce((select jsonb_agg(m.mcp_server_id order by m.mcp_server_id) from agent_mcp_servers m where m.agent_id = ?), '[]'::jsonb))`;

/**
 * A version's columns as read: `links` without the tools and MCP servers deleted since (a primary-key
 * probe per id; a draft links at most 128 tools and 20 servers). Documents are the agent's own copies and stay while it does.
 */
const VERSION_COLUMNS = `v.workspace_id, v.agent_id, v.version, v.config, v.created_at, v.published_at,
  jsonb_build_object(
    'tool_ids', coalesce((select jsonb_agg(t.id order by t.id) from tools t
                           where t.id in (select jsonb_array_elements_text(v.links -> 'tool_ids')) and t.workspace_id = v.workspace_id), '[]'::jsonb),
    'document_ids', v.links -> 'document_ids',
    'mcp_server_ids', coalesce((select jsonb_agg(s.id order by s.id) from mcp_servers s
                                 where s.id in (select jsonb_array_elements_text(v.links -> 'mcp_server_ids')) and s.workspace_id = v.workspace_id), '[]'::jsonb)
  ) as links`;

/**
 * The SET of a write's version counters: the next draft version, published too when `publish` is
 * true (null: when the row's `auto_publish` is). The row lock orders writers; the versions' primary
 * key is the backstop.
 */
function nextVersion(trx: Knex, publish: boolean | null): Record<string, Knex.Raw> {
  return {
    draft_version: trx.raw('draft_version + 1'),
    published_version:
      publish === null
        ? trx.raw('case when auto_publish then draft_version + 1 else published_version end')
        : trx.raw(publish ? 'draft_version + 1' : 'published_version'),
  };
}

export class AgentStore {
  constructor(private readonly db: Knex) {}

  /** The agent and its version 1, published (a new agent has nothing live to protect), in one transaction. */
  async insert(row: { id: string; workspace_id: string; auto_publish: boolean } & AgentValues): Promise<AgentRow> {
    try {
      return await this.db.transaction(async (trx) => {
        const [created] = await trx('agents')
          .insert({ ...encode(row), draft_version: 1, published_version: 1 })
          .returning('*');
        await this.insertVersion(trx, created);
        return created;
      });
    } catch (err) {
      throw sipBindingError(err, row);
    }
  }

  /**
   * The version a write just made (`row.draft_version`, its configuration), published when the row
   * says so. The primary key (agent_id, version) refuses a second row of the same number.
   */
  private async insertVersion(trx: Knex, row: AgentRow): Promise<void> {
    await trx('agent_versions').insert({
      workspace_id: row.workspace_id,
      agent_id: row.id,
      version: row.draft_version,
      config: JSON.stringify(configOf(row)),
      links: trx.raw(DRAFT_LINKS, [row.id, row.id, row.id]),
      published_at: row.published_version === row.draft_version ? trx.fn.now() : null,
    });
  }

  findVersion(workspaceId: string, agentId: string, version: number, trx: Knex = this.db): Promise<AgentVersionRow | undefined> {
    return trx('agent_versions as v').where({ 'v.workspace_id': workspaceId, 'v.agent_id': agentId, 'v.version': version }).first(trx.raw(VERSION_COLUMNS));
  }

  listVersions(workspaceId: string, agentId: string, params: PageParams) {
    return paginate<AgentVersionRow & { id?: string }, AgentVersionRow>(
      this.db('agent_versions as v').where({ 'v.workspace_id': workspaceId, 'v.agent_id': agentId }).select(this.db.raw(VERSION_COLUMNS)),
      params,
      (r) => r,
      'v.version',
    );
  }

  /**
   * A write that changes only what the agent links (the caller changed a link table in `trx`, under
   * the row lock): the next version, holding the new links, published when the row's `auto_publish` is on.
   */
  linksWritten(trx: Knex, row: AgentRow): Promise<AgentRow> {
    return this.write(trx, row.id, {}, row.auto_publish);
  }

  /**
   * Makes the link tables say what `links` says (a restore; the caller holds the row lock): tools and
   * MCP servers of the workspace that still exist are linked again and the others unlinked; the
   * version's documents are taken back (un-detached) and the others detached.
   */
  async relink(trx: Knex, row: AgentRow, links: AgentLinks): Promise<void> {
    const pairs = [
      ['agent_tools', 'tool_id', 'tools', links.tool_ids],
      ['agent_mcp_servers', 'mcp_server_id', 'mcp_servers', links.mcp_server_ids],
    ] as const;
    for (const [table, column, target, ids] of pairs) {
      await trx(table)
        .where({ agent_id: row.id })
        .whereNot((q) => q.whereIn(column, ids))
        .delete();
      await trx.raw(
        `insert into ${table} (agent_id, ${column}, workspace_id)
         select ?, t.id, t.workspace_id from ${target} t where t.id = any(?::text[]) and t.workspace_id = ?
         on conflict do nothing`,
        [row.id, ids, row.workspace_id],
      );
    }
    await trx('agent_documents')
      .where({ agent_id: row.id })
      .update({ detached_at: trx.raw('case when id = any(?::text[]) then null else coalesce(detached_at, now()) end', [links.document_ids]) });
  }

  /** Makes `version` (which exists) the published one; the caller holds the row lock. */
  async publish(trx: Knex, row: AgentRow, version: number): Promise<AgentRow> {
    const [updated] = await trx('agents').where({ id: row.id }).update({ published_version: version, updated_at: trx.fn.now() }).returning('*');
    await trx('agent_versions').where({ agent_id: row.id, version }).update({ published_at: trx.fn.now() });
    return updated;
  }

  /** By id alone, so callers can tell "another workspace's" (403) from "none" (404). */
  find(id: string, trx: Knex = this.db): Promise<AgentRow | undefined> {
    return trx('agents').where({ id }).first();
  }

  /** The version the agent publishes now, read past any cache (one primary-key read). */
  publishedVersion(id: string): Promise<Pick<AgentRow, 'workspace_id' | 'published_version'> | undefined> {
    return this.db('agents').where({ id }).first('workspace_id', 'published_version');
  }

  /** Only the columns of the public profile: nothing else of the agent leaves the database for it. */
  findPublic(id: string): Promise<Pick<AgentRow, 'id' | 'name' | 'enable_webcam' | 'enable_screen_share'> | undefined> {
    return this.db('agents').where({ id }).first('id', 'name', 'enable_webcam', 'enable_screen_share');
  }

  findForUpdate(trx: Knex.Transaction, id: string): Promise<AgentRow | undefined> {
    return trx('agents').where({ id }).forUpdate().first();
  }

  /**
   * A write: the changed columns and the next version, published when `autoPublish` (the value the
   * write leaves) is on. Run inside the caller's transaction, which holds the row lock.
   */
  async update(trx: Knex, id: string, values: Partial<AgentValues>, autoPublish: boolean): Promise<AgentRow> {
    try {
      return await this.write(trx, id, values, autoPublish);
    } catch (err) {
      throw sipBindingError(err, values);
    }
  }

  /** A restore's write: as `update`, but it never touches the SIP binding (restore keeps the row's), so no binding error can come of it. */
  restore(trx: Knex, id: string, values: Omit<AgentValues, 'carrier_accounts' | 'sip_trunk_id' | 'sip_phone_number'>, autoPublish: boolean): Promise<AgentRow> {
    return this.write(trx, id, values, autoPublish);
  }

  private async write(trx: Knex, id: string, values: Partial<AgentValues>, autoPublish: boolean): Promise<AgentRow> {
    const [row] = await trx('agents')
      .where({ id })
      .update({ ...encode(values), auto_publish: autoPublish, ...nextVersion(trx, autoPublish), updated_at: trx.fn.now() })
      .returning('*');
    await this.insertVersion(trx, row);
    return row;
  }

  async delete(workspaceId: string, id: string, trx: Knex = this.db): Promise<void> {
    await trx('agents').where({ id, workspace_id: workspaceId }).delete();
  }

  list(workspaceId: string, params: PageParams) {
    return paginate<AgentRow, AgentRow>(this.db('agents').where({ workspace_id: workspaceId }).select('*'), params, (r) => r);
  }

  /** The agent answering inbound calls to `phoneNumber` at `provider`, if any (at most one: agent_inbound_numbers' key). */
  findInbound(provider: string, phoneNumber: string): Promise<AgentRow | undefined> {
    return this.db('agents')
      .join('agent_inbound_numbers as n', 'n.agent_id', 'agents.id')
      .where({ 'n.provider': provider, 'n.phone_number': phoneNumber })
      .first('agents.*');
  }

  /** The agent answering inbound SIP calls to `phoneNumber`, whichever trunk delivers it (at most one: a unique index). */
  findSipInboundNumber(phoneNumber: string): Promise<AgentRow | undefined> {
    return this.db('agents').where({ sip_phone_number: phoneNumber }).first();
  }

  /** The agent answering inbound SIP calls to `phoneNumber` through `trunkId`, if any (at most one: a unique index). */
  findSipInbound(trunkId: string, phoneNumber: string): Promise<AgentRow | undefined> {
    return this.db('agents').where({ sip_trunk_id: trunkId, sip_phone_number: phoneNumber }).first();
  }

  /** Sets inbound on or off when the number is still `phoneNumber`; a unique violation means another agent answers it. */
  async setInbound(workspaceId: string, id: string, provider: string, phoneNumber: string, enabled: boolean): Promise<AgentRow | undefined> {
    return this.db.transaction(async (trx) => {
      const [row] = await trx('agents')
        .where({ id, workspace_id: workspaceId })
        .whereRaw(`carrier_accounts -> ?::text ->> 'phone_number' = ?`, [provider, phoneNumber])
        .update({
          carrier_accounts: trx.raw(`jsonb_set(carrier_accounts, array[?::text, 'inbound_enabled'], to_jsonb(?::boolean))`, [provider, enabled]),
          // The row's own auto_publish (SET reads the row as it was; this write does not change it).
          ...nextVersion(trx, null),
          updated_at: trx.fn.now(),
        })
        .returning('*');
      if (row) await this.insertVersion(trx, row);
      return row as AgentRow | undefined;
    });
  }

  transaction<T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }
}
