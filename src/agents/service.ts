/**
 * Agents: create, read, update (the spec's PATCH rules), delete, and the decrypted view the call and
 * session bridges run an agent from.
 *
 * Update rules (AgentUpdateRequest in the contract): only fields present change; provider configs merge
 * field by field (a field sent as null is cleared, so `{auth_token}` alone rotates the token); a provider
 * config sent as null clears the provider (configured and inbound_enabled false); changing or clearing a
 * provider's phone_number turns its inbound off; credentials are sealed with the SecretBox before they
 * reach the store and are never returned, logged or quoted in errors. Nothing is checked with a carrier.
 * `analysis` (what post-call analysis extracts) replaces the stored setting as a whole; its schema is
 * checked in the schema pool's worker before anything is stored (422 naming the field). The agent's
 * default `variable_placeholders` may not fill its instruction, first message or voicemail message past
 * that field's cap (422 `filled_text_too_long`, as a call's variables may not), checked on the values
 * the write leaves.
 * `sip_config` (the SIP trunk number the agent answers) replaces the stored binding; the SIP trunks
 * domain checks it (`useSipNumberCheck`) and migration 034's foreign key and unique index hold it.
 */
import type { Knex } from 'knex';
import type { components } from '../../generated/openapi.js';
import type { SecretBox } from '../crypto/secrets.js';
import { conflict, notFound, otherWorkspace, unprocessable } from '../errors/api-error.js';
import { isUniqueViolation } from '../lib/db-errors.js';
import { newUnguessableId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import { checkAnalysisSchema } from './analysis-check.js';
import { fillOverflow, overflowMessage, Template } from '../contract/placeholders.js';
import { agentETag, checkIfMatch } from './etag.js';
import type {
  AgentLinks,
  AgentRow,
  AgentStore,
  AgentValues,
  AgentVersionRow,
  AnalysisStored,
  CarrierAccountStored,
  CarrierAccountsStored,
  PhoneTransferDestination,
  VoicemailStored,
} from './store.js';
import { AGENT_CONFIG_CARRIERS, type AgentConfigSchema, type HeldAccount } from '../carriers/index.js';
import { checkCallerId } from '../destinations/service.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import { deepFreeze, type NotifiedCache } from '../db/notified-cache.js';
import { checkRedactionSetting, type RedactionSetting } from '../redaction/setting.js';
import type { VoiceCatalogue } from '../voice/catalogue.js';
import { agentSettings, type ConversationSettings } from '../voice/conversation-settings.js';

export type Agent = components['schemas']['Agent'];
export type PublicAgentProfile = components['schemas']['PublicAgentProfile'];
type CreateRequest = components['schemas']['AgentCreateRequest'];
type UpdateRequest = components['schemas']['AgentUpdateRequest'];
type Provider = components['schemas']['Provider'];
type VoicemailInput = components['schemas']['VoicemailConfigInput'];
type RealtimeInput = components['schemas']['RealtimeInput'];
type AnalysisInput = components['schemas']['AgentAnalysisInput'];
export type AgentVersion = components['schemas']['AgentVersion'];

/** An agent as the call and session bridges need it; credentials in plaintext, so never serialise it. */
export interface RuntimeAgent {
  id: string;
  workspaceId: string;
  /** The version whose configuration this is (the published one unless a conversation named another). */
  version: number;
  name: string;
  instruction: string;
  firstMessage: string;
  /** The live model; null: the service's `VOICE_MODEL`. */
  model: string | null;
  /** The post-call analysis model; null: the service's `VOICE_ANALYSIS_MODEL`. */
  analysisModel: string | null;
  voiceId: string | null;
  language: string | null;
  languageCode: string | null;
  accent: string | null;
  canEndConversation: boolean;
  transferPhoneNumber: string | null;
  transferCriteria: string | null;
  /**
   * Every place a call of the agent may be transferred to: `transfer_phone_number` (named `default`)
   * first, then the numbers of `transfer_destinations` (its SIP URI destinations are not offered yet).
   */
  transferDestinations: PhoneTransferDestination[];
  /** Where inbound calls are set up per caller before they are answered (calls/inbound-setup.ts). */
  inboundSetupUrl: string | null;
  /** Record the agent's conversations unless a call or batch says otherwise. */
  recordingEnabled: boolean;
  /** Phone calls offer the built-in opt-out tool (the agent's `opt_out` setting). */
  optOutEnabled: boolean;
  /** Spoken first on the agent's recorded phone calls. */
  recordingDisclosure: string | null;
  variablePlaceholders: Record<string, string>;
  realtime: { enableWebcam: boolean; enableScreenShare: boolean };
  voicemailConfig: VoicemailStored | null;
  /** What post-call analysis extracts; copied onto each conversation as it starts. */
  analysis: AnalysisStored | null;
  /** What the agent's conversations redact and where; copied onto each conversation as it starts. */
  redaction: RedactionSetting | null;
  /** How the agent's conversations flow (turn-taking, interruptions, idle ladder, maximum length); null: every default. */
  conversation: ConversationSettings | null;
  /**
   * Its accounts at the carriers whose account is its `<provider>_config`, secrets opened, by provider
   * (nothing stored: no key); each carrier's plug-in reads its own (src/carriers/credentials.ts).
   */
  carrierAccounts: Partial<Record<Provider, HeldAccount>>;
  /** The SIP trunk number the agent answers inbound calls on, if any. */
  sip: { trunkId: string; phoneNumber: string } | null;
  /** What this version links: the tools, documents and MCP servers its conversations may use. */
  links: RuntimeLinks;
}

/** The ids a version links (its `links`); a tool or MCP server deleted since is skipped where it is used. */
export interface RuntimeLinks {
  toolIds: readonly string[];
  documentIds: readonly string[];
  mcpServerIds: readonly string[];
}

/** Links of nothing (a conversation whose version is unknown runs no tool). */
export const NO_LINKS: RuntimeLinks = Object.freeze({ toolIds: [], documentIds: [], mcpServerIds: [] });

function runtimeLinks(l: AgentLinks | undefined): RuntimeLinks {
  return l ? { toolIds: l.tool_ids, documentIds: l.document_ids, mcpServerIds: l.mcp_server_ids } : NO_LINKS;
}

/**
 * A change to what an agent links, made by the domain that owns the linked resource (tools, knowledge,
 * MCP servers) in the agent's write transaction, under its row lock. True when it changed something
 * (a version is made); false when there was nothing to change (attached already, detached already).
 */
export type LinkChange = (trx: Knex.Transaction) => Promise<boolean>;

/** The agents as the linking domains use them (MCP servers take it as an interface). */
export interface AgentLinkWriter {
  changeLinks(workspaceId: string, agentId: string, ifMatch: string | undefined, change: LinkChange): Promise<string>;
}

/** Why `runtimeOf` has no agent to run: none, another workspace's, or no such version of it. */
export type RuntimeMiss = 'not_found' | 'other_workspace' | 'version_not_found';

/** The destination policy as agents use it: whether the workspace may transfer calls to a number (422 when not). */
export interface TransferPolicy {
  checkDestination(workspaceId: string, number: string, param: string): Promise<void>;
  /** 422 unless a transfer destination may point at the SIP address `uri`. */
  checkSipUri(workspaceId: string, uri: string, param: string): Promise<void>;
}

/**
 * The SIP trunks as agents use them: whether a binding names a trunk of the workspace (404/403 naming
 * `sip_config.trunk_id`) that delivers the number (422 `sip_number_not_on_trunk`). Given by the
 * assembly (src/sip-trunks imports agents, not the reverse); the database's foreign key holds the rule
 * either way.
 */
export interface SipNumberCheck {
  checkAgentNumber(workspaceId: string, trunkId: string, phoneNumber: string): Promise<void>;
}

/** Runs before an agent is deleted and may refuse it (the batch engine refuses while a batch is active). */
export type DeleteGuard = (workspaceId: string, agentId: string) => Promise<void>;

/** The context a provider credential is sealed for: it opens only in that agent's field. */
const credentialContext = (agentId: string, provider: Provider, field: string) => `agents/${agentId}/${provider}/${field}`;

/** A provider's `<provider>_config` in a request body (its `<Provider>ConfigInput`; the contract checked its fields). */
type ConfigInput = Record<string, string | null | undefined>;
const configInput = (body: UpdateRequest, provider: Provider) => (body as Record<string, unknown>)[`${provider}_config`] as ConfigInput | null | undefined;

const has = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

/** 422 `filled_text_too_long` when the agent's default variables fill one of its texts past that field's cap (`param` names the variable). */
function checkFilledDefaults(v: Pick<AgentValues, 'instruction' | 'first_message' | 'voicemail_config' | 'variable_placeholders'>): void {
  const template = (text: string | null | undefined) => (text ? new Template(text) : null);
  const overflow = fillOverflow(
    {
      instruction: template(v.instruction),
      first_message: template(v.first_message),
      'voicemail_config.message': template(v.voicemail_config?.enabled ? v.voicemail_config.message : null),
    },
    v.variable_placeholders,
    null,
  );
  if (overflow) throw unprocessable('filled_text_too_long', overflowMessage(overflow), `variable_placeholders.${overflow.variable}`);
}

function voicemail(v: VoicemailInput | null | undefined): VoicemailStored | null {
  if (!v) return null;
  return {
    enabled: v.enabled ?? false,
    message: v.message ?? null,
    detection_timeout_seconds: v.detection_timeout_seconds ?? null,
    retry_on_voicemail: v.retry_on_voicemail ?? true,
  };
}

/** The stored setting: both fields, `null` where not set; a setting with neither is no setting. */
function analysisSetting(a: AnalysisInput | null | undefined): AnalysisStored | null {
  const schema = (a?.schema ?? null) as Record<string, unknown> | null;
  const criteria = a?.success_criteria ?? null;
  return schema === null && criteria === null ? null : { schema, success_criteria: criteria };
}

/** Whether the account holds the number and every field the carrier needs (`telephony.<provider>.configured`). */
function configured(schema: AgentConfigSchema, a: CarrierAccountStored | undefined): boolean {
  return Boolean(a?.phone_number && schema.requiredFields.every((f) => a.config?.[f]));
}

const AGENT_ID = /^agt_[0-9A-Z]{26}$/;

/** The name `transfer_phone_number` goes by among an agent's transfer destinations. */
export const DEFAULT_TRANSFER = 'default';

export function agentNotFound(agentId: string) {
  return notFound('agent_not_found', `No agent ${agentId}.`, 'agent_id');
}

export class AgentService {
  private readonly deleteGuards: DeleteGuard[] = [];
  private sipNumbers: SipNumberCheck | null = null;
  private catalogue: { models: Set<string>; voices: Set<string>; analysisModels: Set<string>; served: VoiceCatalogue } | null = null;

  constructor(
    private readonly store: AgentStore,
    private readonly secrets: SecretBox,
    private readonly transfers: TransferPolicy,
    private readonly outbound: OutboundPolicy,
    /**
     * The agents conversations run from, decrypted, by id (kept only in memory; dropped by migration
     * 030's trigger on any write to the row). None: every read goes to the database.
     */
    private readonly runtimeAgents?: NotifiedCache<RuntimeAgent>,
  ) {}

  /** An inbound setup URL must be one the outbound guard lets requests go to (422 url_not_allowed, as for webhooks). */
  private async checkSetupUrl(body: UpdateRequest): Promise<void> {
    const url = body.inbound_setup?.url;
    if (url) await checkTargetUrl(this.outbound, url, 'inbound_setup.url', { acceptUnresolvable: true });
  }

  /**
   * The numbers a body sets, checked before anything is stored: the transfer number is a destination
   * (the workspace's policy), the providers' numbers are calling numbers (422 naming the field).
   */
  private async checkNumbers(workspaceId: string, body: UpdateRequest): Promise<void> {
    for (const [provider] of AGENT_CONFIG_CARRIERS) {
      const phone = configInput(body, provider)?.phone_number;
      if (phone) checkCallerId(phone, `${provider}_config.phone_number`);
    }
    if (body.transfer_phone_number) await this.transfers.checkDestination(workspaceId, body.transfer_phone_number, 'transfer_phone_number');
    const destinations = body.transfer_destinations ?? [];
    const names = new Set<string>();
    for (const [i, d] of destinations.entries()) {
      if (d.name === DEFAULT_TRANSFER || names.has(d.name))
        throw unprocessable(
          'transfer_destination_name_taken',
          d.name === DEFAULT_TRANSFER
            ? `'${DEFAULT_TRANSFER}' names transfer_phone_number; give this destination another name.`
            : `Another transfer destination is already named '${d.name}'.`,
          `transfer_destinations[${i}].name`,
        );
      names.add(d.name);
      if (Boolean(d.phone_number) === Boolean(d.sip_uri))
        throw unprocessable('transfer_target_required', 'A transfer destination needs exactly one of phone_number and sip_uri.', `transfer_destinations[${i}]`);
      if (d.phone_number) await this.transfers.checkDestination(workspaceId, d.phone_number, `transfer_destinations[${i}].phone_number`);
      else await this.transfers.checkSipUri(workspaceId, d.sip_uri!, `transfer_destinations[${i}].sip_uri`);
    }
  }

  private static setsNumbers(body: UpdateRequest): boolean {
    return Boolean(body.transfer_phone_number || body.transfer_destinations?.length || AGENT_CONFIG_CARRIERS.some(([p]) => configInput(body, p)?.phone_number));
  }

  /** The models and voices agents may name (src/voice/catalogue.ts); none set: any. */
  useCatalogue(catalogue: VoiceCatalogue): void {
    this.catalogue = {
      models: new Set(catalogue.models.map((m) => m.id)),
      voices: new Set(catalogue.voices.map((v) => v.id)),
      analysisModels: new Set(catalogue.analysis_models.map((m) => m.id)),
      served: catalogue,
    };
  }

  voiceCatalogue(): VoiceCatalogue {
    return this.catalogue?.served ?? { models: [], voices: [], analysis_models: [] };
  }

  /** 422 `unknown_model` / `unknown_voice` / `unknown_analysis_model` for a `model`, `voice_id` or `analysis_model` the catalogue does not list. */
  private checkCatalogue(body: UpdateRequest): void {
    if (!this.catalogue) return;
    if (body.model != null && !this.catalogue.models.has(body.model))
      throw unprocessable('unknown_model', `'${body.model.slice(0, 200)}' is not a model of the voice catalogue (GET /api/v1/voice-catalogue).`, 'model');
    if (body.voice_id != null && !this.catalogue.voices.has(body.voice_id))
      throw unprocessable('unknown_voice', `'${body.voice_id.slice(0, 100)}' is not a voice of the voice catalogue (GET /api/v1/voice-catalogue).`, 'voice_id');
    if (body.analysis_model != null && !this.catalogue.analysisModels.has(body.analysis_model))
      throw unprocessable(
        'unknown_analysis_model',
        `'${body.analysis_model.slice(0, 200)}' is not an analysis model of the voice catalogue (GET /api/v1/voice-catalogue).`,
        'analysis_model',
      );
  }

  /** Lets the SIP trunks domain check `sip_config` bindings before they are stored. */
  useSipNumberCheck(check: SipNumberCheck): void {
    this.sipNumbers = check;
  }

  private async checkSipConfig(workspaceId: string, body: UpdateRequest): Promise<void> {
    const sip = body.sip_config;
    if (sip && this.sipNumbers) await this.sipNumbers.checkAgentNumber(workspaceId, sip.trunk_id, sip.phone_number);
  }

  /** Lets a later domain refuse agent deletion (409) by throwing an ApiError. */
  addDeleteGuard(guard: DeleteGuard): void {
    this.deleteGuards.push(guard);
  }

  toAgent(row: AgentRow): Agent {
    return {
      agent_id: row.id,
      name: row.name,
      description: row.description,
      instruction: row.instruction,
      first_message: row.first_message,
      model: row.model,
      voice_id: row.voice_id,
      analysis_model: row.analysis_model,
      language: row.language,
      language_code: row.language_code,
      accent: row.accent,
      can_end_conversation: row.can_end_conversation,
      transfer_phone_number: row.transfer_phone_number,
      transfer_criteria: row.transfer_criteria,
      transfer_destinations: row.transfer_destinations.map((d) => ({
        name: d.name,
        phone_number: d.phone_number ?? null,
        sip_uri: d.sip_uri ?? null,
        description: d.description,
      })),
      inbound_setup: row.inbound_setup,
      recording: { enabled: row.recording_enabled },
      recording_disclosure: row.recording_disclosure,
      opt_out: { enabled: row.opt_out_enabled },
      variable_placeholders: row.variable_placeholders,
      voicemail_config: row.voicemail_config,
      telephony: {
        ...(Object.fromEntries(
          AGENT_CONFIG_CARRIERS.map(([provider, schema]) => {
            const a = row.carrier_accounts[provider];
            return [provider, { configured: configured(schema, a), phone_number: a?.phone_number ?? null, inbound_enabled: a?.inbound_enabled ?? false }];
          }),
        ) as Omit<Agent['telephony'], 'sip'>),
        sip: row.sip_trunk_id && row.sip_phone_number ? { trunk_id: row.sip_trunk_id, phone_number: row.sip_phone_number } : null,
      },
      realtime: { enable_webcam: row.enable_webcam, enable_screen_share: row.enable_screen_share },
      analysis: row.analysis,
      redaction: row.redaction,
      conversation: row.conversation,
      draft_version: row.draft_version,
      published_version: row.published_version,
      auto_publish: row.auto_publish,
      created_at: row.created_at.toISOString(),
    };
  }

  /** A version as the API shows it: the agent as it read right after the write that made it. */
  private toVersion(agent: AgentRow, v: AgentVersionRow): AgentVersion {
    const { draft_version: _d, published_version: _p, auto_publish: _a, ...shown } = this.toAgent({ ...agent, ...v.config });
    return {
      object: 'agent_version',
      agent_id: v.agent_id,
      version: v.version,
      is_published: agent.published_version === v.version,
      published_at: v.published_at ? v.published_at.toISOString() : null,
      created_at: v.created_at.toISOString(),
      agent: shown,
      links: v.links,
    };
  }

  /** The agent row of this workspace: 404 when there is none, 403 when it is another workspace's. */
  async owned(workspaceId: string, agentId: string): Promise<AgentRow> {
    const row = await this.store.find(agentId);
    return this.check(row, workspaceId, agentId);
  }

  private check(row: AgentRow | undefined, workspaceId: string, agentId: string): AgentRow {
    if (!row) throw agentNotFound(agentId);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('agent');
    return row;
  }

  /**
   * What any page may know of an agent (no credentials): its name and realtime settings. A malformed id
   * answers the same 404 as an unknown one, without a query.
   */
  async publicProfile(agentId: string): Promise<PublicAgentProfile> {
    const row = AGENT_ID.test(agentId) ? await this.store.findPublic(agentId) : undefined;
    if (!row) throw agentNotFound(agentId);
    return { agent_id: row.id, name: row.name, realtime: { enable_webcam: row.enable_webcam, enable_screen_share: row.enable_screen_share } };
  }

  async create(workspaceId: string, body: CreateRequest): Promise<Agent> {
    const values: AgentValues = {
      name: body.name,
      description: '',
      instruction: '',
      first_message: '',
      model: null,
      voice_id: null,
      analysis_model: null,
      language: null,
      language_code: null,
      accent: null,
      can_end_conversation: false,
      transfer_phone_number: null,
      transfer_criteria: null,
      transfer_destinations: [],
      inbound_setup: null,
      recording_enabled: false,
      opt_out_enabled: false,
      recording_disclosure: null,
      variable_placeholders: {},
      voicemail_config: null,
      carrier_accounts: {},
      sip_trunk_id: null,
      sip_phone_number: null,
      enable_webcam: true,
      enable_screen_share: true,
      analysis: null,
      redaction: null,
      conversation: null,
    };
    this.checkCatalogue(body as UpdateRequest);
    await this.checkNumbers(workspaceId, body as UpdateRequest);
    await this.checkSetupUrl(body as UpdateRequest);
    await this.checkSipConfig(workspaceId, body as UpdateRequest);
    await this.checkAnalysis(workspaceId, body);
    // On create, a field sent as null takes its default, which is exactly what applying it to the defaults does.
    const id = newUnguessableId('agent');
    Object.assign(values, this.changes(id, values, body as UpdateRequest));
    checkFilledDefaults(values);
    const row = await this.store.insert({ id, workspace_id: workspaceId, auto_publish: body.auto_publish ?? true, ...values });
    return this.toAgent(row);
  }

  async list(workspaceId: string, params: PageParams): Promise<Page<Agent>> {
    const page = await this.store.list(workspaceId, params);
    return { ...page, data: page.data.map((r) => this.toAgent(r)) };
  }

  async get(workspaceId: string, agentId: string): Promise<Agent> {
    return this.toAgent(await this.owned(workspaceId, agentId));
  }

  async update(workspaceId: string, agentId: string, body: UpdateRequest, ifMatch?: string): Promise<Agent> {
    if (has(body, 'name') && body.name === null) throw unprocessable('name_required', 'An agent must have a name; it cannot be set to null.', 'name');
    this.checkCatalogue(body);
    if (AgentService.setsNumbers(body)) {
      await this.owned(workspaceId, agentId);
      await this.checkNumbers(workspaceId, body);
    }
    await this.checkSetupUrl(body);
    if (body.sip_config) {
      await this.owned(workspaceId, agentId);
      await this.checkSipConfig(workspaceId, body);
    }
    // Before the row lock: compiling a schema takes a worker thread a while.
    await this.checkAnalysis(workspaceId, body);
    const row = await this.store.transaction(async (trx) => {
      const current = this.check(await this.store.findForUpdate(trx, agentId), workspaceId, agentId);
      checkIfMatch(ifMatch, agentETag(current));
      const changes = this.changes(agentId, current, body);
      const autoPublish = has(body, 'auto_publish') ? (body.auto_publish ?? true) : current.auto_publish;
      if (Object.keys(changes).length === 0 && autoPublish === current.auto_publish) return current;
      checkFilledDefaults({ ...current, ...changes });
      return this.store.update(trx, agentId, changes, autoPublish);
    });
    this.written(agentId);
    return this.toAgent(row);
  }

  /** 422 (analysis_schema_too_large, _too_deep, _too_complex, invalid_analysis_schema) before anything is stored. */
  private async checkAnalysis(workspaceId: string, body: UpdateRequest): Promise<void> {
    const schema = body.analysis?.schema;
    if (schema) await checkAnalysisSchema(workspaceId, schema as Record<string, unknown>);
  }

  async delete(workspaceId: string, agentId: string, ifMatch?: string): Promise<{ status: 'deleted'; agent_id: string }> {
    await this.owned(workspaceId, agentId);
    for (const guard of this.deleteGuards) await guard(workspaceId, agentId);
    await this.store.transaction(async (trx) => {
      const current = this.check(await this.store.findForUpdate(trx, agentId), workspaceId, agentId);
      checkIfMatch(ifMatch, agentETag(current));
      await this.store.delete(workspaceId, agentId, trx);
    });
    this.written(agentId);
    return { status: 'deleted', agent_id: agentId };
  }

  async listVersions(workspaceId: string, agentId: string, params: PageParams): Promise<Page<AgentVersion>> {
    const agent = await this.owned(workspaceId, agentId);
    const page = await this.store.listVersions(workspaceId, agentId, params);
    return { ...page, data: page.data.map((v) => this.toVersion(agent, v)) };
  }

  async getVersion(workspaceId: string, agentId: string, version: number): Promise<AgentVersion> {
    const agent = await this.owned(workspaceId, agentId);
    return this.toVersion(agent, await this.version(workspaceId, agentId, version));
  }

  private async version(workspaceId: string, agentId: string, version: number, trx?: Knex): Promise<AgentVersionRow> {
    const v = await this.store.findVersion(workspaceId, agentId, version, trx);
    if (!v) throw notFound('agent_version_not_found', `Agent ${agentId} has no version ${version}.`, 'version');
    return v;
  }

  /** Makes `version` (default: the draft) the one new conversations run; the same version again changes nothing. */
  async publish(workspaceId: string, agentId: string, version: number | undefined, ifMatch?: string): Promise<Agent> {
    const row = await this.store.transaction(async (trx) => {
      const current = this.check(await this.store.findForUpdate(trx, agentId), workspaceId, agentId);
      checkIfMatch(ifMatch, agentETag(current));
      const target = version ?? current.draft_version;
      await this.version(workspaceId, agentId, target, trx);
      return target === current.published_version ? current : this.store.publish(trx, current, target);
    });
    this.written(agentId);
    return this.toAgent(row);
  }

  /**
   * A new version with `version`'s configuration, written as any write (published when auto_publish
   * is on). The carrier accounts and the SIP binding stay as they are: a number is answered by one
   * agent at a time, and a rotated credential must not come back.
   */
  async restore(workspaceId: string, agentId: string, version: number, ifMatch?: string): Promise<Agent> {
    const row = await this.store.transaction(async (trx) => {
      const current = this.check(await this.store.findForUpdate(trx, agentId), workspaceId, agentId);
      checkIfMatch(ifMatch, agentETag(current));
      const restored = await this.version(workspaceId, agentId, version, trx);
      const { carrier_accounts: _c, sip_trunk_id: _t, sip_phone_number: _n, ...config } = restored.config;
      await this.store.relink(trx, current, restored.links);
      return this.store.restore(trx, agentId, config, current.auto_publish);
    });
    this.written(agentId);
    return this.toAgent(row);
  }

  /**
   * A write that changes only what the agent links: the row lock, `If-Match`, the linking domain's
   * `change` in the same transaction, then the next version (published when `auto_publish` is on)
   * holding the new links. Nothing to change makes no version. Answers the agent's `ETag` after it.
   */
  async changeLinks(workspaceId: string, agentId: string, ifMatch: string | undefined, change: LinkChange): Promise<string> {
    const row = await this.store.transaction(async (trx) => {
      const current = this.check(await this.store.findForUpdate(trx, agentId), workspaceId, agentId);
      checkIfMatch(ifMatch, agentETag(current));
      return (await change(trx)) ? this.store.linksWritten(trx, current) : current;
    });
    this.written(agentId);
    return agentETag(row);
  }

  async loadForRuntime(workspaceId: string, agentId: string): Promise<RuntimeAgent> {
    return this.published(await this.owned(workspaceId, agentId));
  }

  /**
   * The agent as its published version runs it: the row itself when the draft is published
   * (auto_publish, the usual case), else the row with that version's configuration; the version's
   * links either way (one primary-key read). The carrier accounts and SIP binding are the row's (they
   * take effect at once, see restore). A key a version lacks (a column added after it was made) keeps
   * the row's value.
   */
  private async published(row: AgentRow): Promise<RuntimeAgent> {
    const v = await this.store.findVersion(row.workspace_id, row.id, row.published_version);
    return this.runtime(v && row.published_version !== row.draft_version ? this.withConfig(row, v) : row, v?.links);
  }

  private withConfig(row: AgentRow, v: AgentVersionRow): AgentRow {
    return {
      ...row,
      ...v.config,
      carrier_accounts: row.carrier_accounts,
      sip_trunk_id: row.sip_trunk_id,
      sip_phone_number: row.sip_phone_number,
      created_at: row.created_at,
    };
  }

  /**
   * The workspace's agent for a new conversation, decrypted, or why there is none (no error: callers
   * decide what it means). `version`: the one to run; omitted, the published one, read from the row
   * at once, so a publish on another instance counts before its NOTIFY reaches this one's kept agents.
   */
  async runtimeOf(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | RuntimeMiss> {
    let wanted = version;
    if (wanted == null) {
      const row = await this.store.publishedVersion(agentId);
      if (!row) return 'not_found';
      if (row.workspace_id !== workspaceId) return 'other_workspace';
      wanted = row.published_version;
    }
    const kept = await this.kept(workspaceId, agentId);
    if (typeof kept === 'string' || kept.version === wanted) return kept;
    return this.pinned(workspaceId, agentId, wanted);
  }

  /** The published agent as this instance keeps it (until a NOTIFY of a write drops it). */
  private async kept(workspaceId: string, agentId: string): Promise<RuntimeAgent | 'not_found' | 'other_workspace'> {
    let missing: 'not_found' | 'other_workspace' = 'not_found';
    const load = async () => {
      const row = await this.store.find(agentId);
      if (!row) return undefined;
      // Another workspace's agent is neither decrypted nor kept.
      if (row.workspace_id !== workspaceId) {
        missing = 'other_workspace';
        return undefined;
      }
      return this.published(row);
    };
    const agent = this.runtimeAgents ? await this.runtimeAgents.get(agentId, load) : await load();
    if (!agent) return missing;
    // A kept agent was loaded for its own workspace: asked for by another, it is another workspace's.
    if (agent.workspaceId !== workspaceId) return 'other_workspace';
    return agent;
  }

  /**
   * The workspace's agent for a conversation, decrypted; null when it is gone. `version`: the version a
   * conversation was created with, so a publish meanwhile does not change it (null: the published one
   * as this instance keeps it, for what reads only the row's own settings, such as carrier accounts).
   */
  async findForRuntime(workspaceId: string, agentId: string, version?: number | null): Promise<RuntimeAgent | null> {
    const found = await this.kept(workspaceId, agentId);
    if (typeof found === 'string') return null;
    if (version == null || found.version === version) return found;
    const pinned = await this.pinned(workspaceId, agentId, version);
    return typeof pinned === 'string' ? null : pinned;
  }

  /** A version other than the kept one (not kept: each conversation reads it once or twice). */
  private async pinned(workspaceId: string, agentId: string, version: number): Promise<RuntimeAgent | RuntimeMiss> {
    const row = await this.store.find(agentId);
    if (!row) return 'not_found';
    if (row.workspace_id !== workspaceId) return 'other_workspace';
    const v = await this.store.findVersion(workspaceId, agentId, version);
    if (!v) return 'version_not_found';
    return this.runtime({ ...this.withConfig(row, v), published_version: version }, v.links);
  }

  /** The agent that answers inbound calls to `phoneNumber` at `provider`, decrypted; null when none. */
  async inboundAgent(provider: Provider, phoneNumber: string): Promise<RuntimeAgent | null> {
    const row = provider === 'sip' ? await this.store.findSipInboundNumber(phoneNumber) : await this.store.findInbound(provider, phoneNumber);
    return row ? this.published(row) : null;
  }

  /** The agent answering inbound SIP calls to `phoneNumber` through `trunkId`, decrypted; null when none. */
  async sipInboundAgent(trunkId: string, phoneNumber: string): Promise<RuntimeAgent | null> {
    const row = await this.store.findSipInbound(trunkId, phoneNumber);
    return row ? this.published(row) : null;
  }

  /** Turns inbound on or off for the agent's current number at `provider` (the number may not change meanwhile). */
  async setInbound(workspaceId: string, agentId: string, provider: Provider, phoneNumber: string, enabled: boolean): Promise<Agent> {
    if (provider === 'sip')
      throw unprocessable(
        'invalid_value',
        "Inbound SIP calls follow the agent's sip_config: bind a trunk's number to take them, set sip_config to null to stop.",
        'provider',
      );
    let row: AgentRow | undefined;
    try {
      row = await this.store.setInbound(workspaceId, agentId, provider, phoneNumber, enabled);
      this.written(agentId);
    } catch (err) {
      if (isUniqueViolation(err))
        throw conflict('phone_number_in_use', `Another agent already answers inbound calls on ${phoneNumber} at ${provider}.`, 'provider');
      throw err;
    }
    if (!row) throw conflict('provider_not_configured', `The agent's ${provider} phone_number changed meanwhile; try again.`, 'provider');
    return this.toAgent(row);
  }

  /**
   * This instance wrote the agent (committed): its kept runtime view goes now, before the trigger's
   * NOTIFY comes back, so this instance's next read sees the write.
   */
  private written(agentId: string): void {
    this.runtimeAgents?.invalidate(agentId);
  }

  private runtime(row: AgentRow, links: AgentLinks | undefined): RuntimeAgent {
    const carrierAccounts: Partial<Record<Provider, HeldAccount>> = {};
    for (const [provider, schema] of AGENT_CONFIG_CARRIERS) {
      const a = row.carrier_accounts[provider];
      if (!a) continue;
      const config = Object.fromEntries(
        Object.entries(a.config ?? {}).map(([field, v]) => [
          field,
          schema.secretFields.includes(field) ? this.secrets.open(v, credentialContext(row.id, provider, field)) : v,
        ]),
      );
      carrierAccounts[provider] = {
        config,
        phoneNumber: a.phone_number ?? null,
        inboundEnabled: a.inbound_enabled ?? false,
        configured: configured(schema, a),
      };
    }
    // Frozen: a kept view is shared by every conversation of the agent on this instance.
    return deepFreeze({
      id: row.id,
      workspaceId: row.workspace_id,
      version: row.published_version,
      name: row.name,
      instruction: row.instruction,
      firstMessage: row.first_message,
      model: row.model,
      analysisModel: row.analysis_model,
      voiceId: row.voice_id,
      language: row.language,
      languageCode: row.language_code,
      accent: row.accent,
      canEndConversation: row.can_end_conversation,
      transferPhoneNumber: row.transfer_phone_number,
      transferCriteria: row.transfer_criteria,
      transferDestinations: [
        ...(row.transfer_phone_number
          ? [{ name: DEFAULT_TRANSFER, phone_number: row.transfer_phone_number, description: row.transfer_criteria ?? 'The caller asks for a person.' }]
          : []),
        ...row.transfer_destinations.flatMap((d) => (d.phone_number ? [{ name: d.name, phone_number: d.phone_number, description: d.description }] : [])),
      ],
      inboundSetupUrl: row.inbound_setup?.url ?? null,
      recordingEnabled: row.recording_enabled,
      optOutEnabled: row.opt_out_enabled,
      recordingDisclosure: row.recording_disclosure,
      variablePlaceholders: row.variable_placeholders,
      realtime: { enableWebcam: row.enable_webcam, enableScreenShare: row.enable_screen_share },
      voicemailConfig: row.voicemail_config,
      analysis: row.analysis,
      redaction: row.redaction,
      conversation: row.conversation,
      sip: row.sip_trunk_id && row.sip_phone_number ? { trunkId: row.sip_trunk_id, phoneNumber: row.sip_phone_number } : null,
      carrierAccounts,
      links: runtimeLinks(links),
    });
  }

  /** The column values a body changes, applied onto `current` (only the fields present). */
  private changes(agentId: string, current: AgentValues, body: UpdateRequest): Partial<AgentValues> {
    const out: Partial<AgentValues> = {};
    if (has(body, 'name') && body.name != null) out.name = body.name;
    for (const key of ['description', 'instruction', 'first_message'] as const) {
      if (has(body, key)) out[key] = body[key] ?? '';
    }
    for (const key of [
      'model',
      'voice_id',
      'analysis_model',
      'language',
      'language_code',
      'accent',
      'transfer_phone_number',
      'transfer_criteria',
      'recording_disclosure',
    ] as const) {
      if (has(body, key)) out[key] = body[key] ?? null;
    }
    if (has(body, 'can_end_conversation')) out.can_end_conversation = body.can_end_conversation ?? false;
    if (has(body, 'transfer_destinations'))
      out.transfer_destinations = (body.transfer_destinations ?? []).map(({ name, phone_number, sip_uri, description }) => ({
        name,
        phone_number: phone_number ?? null,
        sip_uri: sip_uri ?? null,
        description,
      }));
    if (has(body, 'inbound_setup')) out.inbound_setup = body.inbound_setup ? { url: body.inbound_setup.url } : null;
    if (has(body, 'recording')) out.recording_enabled = body.recording?.enabled ?? false;
    if (has(body, 'opt_out')) out.opt_out_enabled = body.opt_out?.enabled ?? false;
    if (has(body, 'variable_placeholders')) out.variable_placeholders = (body.variable_placeholders ?? {}) as Record<string, string>;
    if (has(body, 'voicemail_config')) out.voicemail_config = voicemail(body.voicemail_config);
    if (has(body, 'analysis')) out.analysis = analysisSetting(body.analysis);
    if (has(body, 'redaction')) out.redaction = checkRedactionSetting(body.redaction);
    if (has(body, 'conversation')) out.conversation = agentSettings(body.conversation);
    if (has(body, 'sip_config')) {
      out.sip_trunk_id = body.sip_config?.trunk_id ?? null;
      out.sip_phone_number = body.sip_config?.phone_number ?? null;
    }
    if (has(body, 'realtime')) {
      const r = body.realtime as RealtimeInput | null;
      if (r === null) {
        out.enable_webcam = true;
        out.enable_screen_share = true;
      } else {
        if (has(r, 'enable_webcam')) out.enable_webcam = r.enable_webcam ?? true;
        if (has(r, 'enable_screen_share')) out.enable_screen_share = r.enable_screen_share ?? true;
      }
    }
    let accounts: CarrierAccountsStored | null = null;
    for (const [provider, schema] of AGENT_CONFIG_CARRIERS) {
      if (!has(body, `${provider}_config`)) continue;
      const stored = current.carrier_accounts[provider];
      const storedPhone = stored?.phone_number ?? null;
      const merged = this.mergeProvider(stored?.config ?? null, storedPhone, configInput(body, provider) ?? null, schema.secretFields, (f) =>
        credentialContext(agentId, provider, f),
      );
      accounts ??= { ...current.carrier_accounts };
      if (merged.config === null && merged.phone === null) delete accounts[provider];
      else
        accounts[provider] = {
          config: merged.config,
          phone_number: merged.phone,
          // A new number (or none) is not answered until inbound is turned on again for it.
          inbound_enabled: merged.phone === storedPhone ? (stored?.inbound_enabled ?? false) : false,
        };
    }
    if (accounts) out.carrier_accounts = accounts;
    return out;
  }

  /** Field-by-field merge; credentials are sealed here. Null input clears everything. */
  private mergeProvider(
    stored: Record<string, string> | null,
    storedPhone: string | null,
    input: Record<string, string | null | undefined> | null,
    secretFields: readonly string[],
    context: (field: string) => string,
  ): { config: Record<string, string> | null; phone: string | null } {
    if (input === null) return { config: null, phone: null };
    const config: Record<string, string> = { ...(stored ?? {}) };
    let phone = storedPhone;
    for (const [key, value] of Object.entries(input)) {
      if (value === undefined) continue;
      if (key === 'phone_number') {
        phone = value;
        continue;
      }
      if (value === null) delete config[key];
      else config[key] = secretFields.includes(key) ? this.secrets.seal(value, context(key)) : value;
    }
    return { config: Object.keys(config).length ? config : null, phone };
  }
}
