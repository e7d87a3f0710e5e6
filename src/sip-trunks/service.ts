/**
 * SIP trunks: the rules of the API (create, list, get, update, delete) and the check agents' `sip_config`
 * bindings go through. Every check of a request's own fields runs before anything is stored; the
 * checks of the merged trunk (complete credentials, a protected inbound side, limits, numbers free)
 * run under the trunk's row lock, so two changes cannot merge over each other. Passwords are sealed
 * with the SecretBox before they reach the store and never leave this file but to the dialler
 * (`termination.ts`).
 */
import type { components } from '../../generated/openapi.js';
import type { SecretBox } from '../crypto/secrets.js';
import { callerIdRefusal } from '../destinations/policy.js';
import { numberError } from '../destinations/service.js';
import { notFound, otherWorkspace, unprocessable } from '../errors/api-error.js';
import { newId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import type { SipNumberCheck } from '../agents/service.js';
import { defaultPort, parseHost, parseSource, showHost, showSource } from './addresses.js';
import type { SipTrunkStore, StoredTrunk, TrunkLimits, TrunkValues, TrunkWrite } from './store.js';

export type SipTrunk = components['schemas']['SipTrunk'];
type CreateRequest = components['schemas']['SipTrunkCreateRequest'];
type UpdateRequest = components['schemas']['SipTrunkUpdateRequest'];
type InboundInput = components['schemas']['SipTrunkInboundInput'];
type OutboundInput = components['schemas']['SipTrunkOutboundInput'];
type CredentialsInput = components['schemas']['SipDigestCredentialsInput'];

/** The contract's limits (SipTrunkCreateRequest, SipTrunkInboundInput). */
export const SIP_TRUNK_LIMITS: TrunkLimits = { trunksPerWorkspace: 20, numbersPerWorkspace: 2000 };

/** The context a trunk password is sealed for: it opens only in that trunk's field. */
export const passwordContext = (trunkId: string, side: 'inbound' | 'outbound') => `sip-trunks/${trunkId}/${side}/password`;

const has = (o: object, key: string) => Object.prototype.hasOwnProperty.call(o, key);

export function sipTrunkNotFound(trunkId: string, param = 'trunk_id') {
  return notFound('sip_trunk_not_found', `No SIP trunk ${trunkId}.`, param);
}

/** A request's lists, checked and normalised (sorted, duplicates dropped) before anything is stored. */
interface CheckedLists {
  sources?: string[];
  numbers?: string[];
  callerIds?: string[];
  host?: { host: string; port: number | null };
}

function checkSources(raw: string[]): string[] {
  const out = raw.map((entry, i) => {
    const parsed = parseSource(entry);
    if (parsed.ok) return parsed.cidr;
    const hint = parsed.suggestion ? ` (did you mean ${parsed.suggestion}?)` : '';
    throw unprocessable('invalid_cidr', `'${entry}' is not an address or a CIDR range without host bits${hint}.`, `inbound.allowed_sources[${i}]`);
  });
  return [...new Set(out)].sort();
}

function checkNumbers(raw: string[], param: string): string[] {
  raw.forEach((n, i) => {
    const refusal = callerIdRefusal(n);
    if (refusal) throw numberError(refusal, `${param}[${i}]`);
  });
  return [...new Set(raw)].sort();
}

/** Credentials merged onto the stored ones: the password sealed, both fields required once merged. */
function mergeCredentials(
  stored: { username: string | null; password: string | null },
  input: CredentialsInput | null | undefined,
  seal: (password: string) => string,
  param: string,
): { username: string | null; password: string | null } {
  if (input === undefined) return stored;
  if (input === null) return { username: null, password: null };
  const username = input.username ?? stored.username;
  const password = input.password !== undefined ? seal(input.password) : stored.password;
  if (!username || !password)
    throw unprocessable('sip_credentials_incomplete', 'Digest credentials need both username and password.', `${param}.${username ? 'password' : 'username'}`);
  return { username, password };
}

export class SipTrunkService implements SipNumberCheck {
  constructor(
    private readonly store: SipTrunkStore,
    private readonly secrets: SecretBox,
    private readonly outbound: OutboundPolicy,
    private readonly limits: TrunkLimits = SIP_TRUNK_LIMITS,
  ) {}

  toSipTrunk(t: StoredTrunk): SipTrunk {
    const credentials = (username: string | null) => (username ? { username, password_set: true } : null);
    return {
      trunk_id: t.id,
      name: t.name,
      inbound: t.inbound ? { allowed_sources: t.sources.map(showSource), auth: credentials(t.inbound_username), numbers: t.numbers } : null,
      outbound:
        t.outbound && t.outbound_host && t.outbound_transport
          ? {
              host: showHost(t.outbound_host, t.outbound_port ?? defaultPort(t.outbound_transport)),
              transport: t.outbound_transport,
              auth: credentials(t.outbound_username),
              caller_id_numbers: t.outbound_caller_ids,
            }
          : null,
      created_at: t.created_at.toISOString(),
      updated_at: t.updated_at.toISOString(),
    };
  }

  /** The trunk of this workspace: 404 when there is none, 403 when it is another workspace's. */
  async owned(workspaceId: string, trunkId: string, param = 'trunk_id'): Promise<StoredTrunk> {
    const row = await this.store.find(trunkId);
    if (!row) throw sipTrunkNotFound(trunkId, param);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('SIP trunk');
    return row;
  }

  /** The checks of a request's own fields (no stored state needed): 422 naming the field. */
  private async checkFields(body: UpdateRequest): Promise<CheckedLists> {
    const out: CheckedLists = {};
    const inbound = body.inbound as InboundInput | null | undefined;
    const outbound = body.outbound as OutboundInput | null | undefined;
    if (inbound?.allowed_sources) out.sources = checkSources(inbound.allowed_sources);
    if (inbound?.numbers) out.numbers = checkNumbers(inbound.numbers, 'inbound.numbers');
    if (outbound?.caller_id_numbers) out.callerIds = checkNumbers(outbound.caller_id_numbers, 'outbound.caller_id_numbers');
    if (outbound?.host !== undefined) {
      const parsed = parseHost(outbound.host);
      if (!parsed.ok) throw unprocessable('invalid_sip_host', parsed.message, 'outbound.host');
      // The outbound guard of webhooks and tools: no signalling to internal addresses. A name that does
      // not resolve yet is kept; the dialler checks the address again when it sends.
      const port = parsed.value.port ?? 5060;
      await checkTargetUrl(this.outbound, `http://${showHost(parsed.value.host, port)}/`, 'outbound.host', { acceptUnresolvable: true });
      out.host = parsed.value;
    }
    return out;
  }

  /** The row values and lists a body sets, merged onto `current` (a new trunk: all empty). */
  private merge(trunkId: string, current: StoredTrunk | null, body: UpdateRequest, checked: CheckedLists): TrunkWrite {
    const write: TrunkWrite = { values: {} };
    const v = write.values;
    if (body.name !== undefined) v.name = body.name;
    if (has(body, 'inbound')) {
      const inbound = body.inbound as InboundInput | null;
      if (inbound === null) {
        Object.assign(v, { inbound: false, inbound_username: null, inbound_password: null });
        write.sources = [];
        write.numbers = [];
      } else {
        const auth = mergeCredentials(
          { username: current?.inbound_username ?? null, password: current?.inbound_password ?? null },
          inbound.auth,
          (p) => this.secrets.seal(p, passwordContext(trunkId, 'inbound')),
          'inbound.auth',
        );
        Object.assign(v, { inbound: true, inbound_username: auth.username, inbound_password: auth.password });
        if (checked.sources) write.sources = checked.sources;
        if (checked.numbers) {
          write.numbers = checked.numbers;
          write.requestedNumbers = inbound.numbers;
        }
        const sources = write.sources ?? current?.sources ?? [];
        if (sources.length === 0 && !auth.username)
          throw unprocessable(
            'sip_inbound_unprotected',
            'Inbound calls need allowed_sources or auth (or both): a trunk open to any source without credentials is refused.',
            'inbound',
          );
      }
    }
    if (has(body, 'outbound')) {
      const outbound = body.outbound as OutboundInput | null;
      if (outbound === null) {
        Object.assign(v, {
          outbound: false,
          outbound_host: null,
          outbound_port: null,
          outbound_transport: null,
          outbound_username: null,
          outbound_password: null,
          outbound_caller_ids: [],
        });
      } else {
        const auth = mergeCredentials(
          { username: current?.outbound_username ?? null, password: current?.outbound_password ?? null },
          outbound.auth,
          (p) => this.secrets.seal(p, passwordContext(trunkId, 'outbound')),
          'outbound.auth',
        );
        const host = checked.host ?? (current?.outbound_host ? { host: current.outbound_host, port: current.outbound_port } : null);
        if (!host) throw unprocessable('sip_outbound_incomplete', 'Outbound termination needs a host.', 'outbound.host');
        Object.assign(v, {
          outbound: true,
          outbound_host: host.host,
          outbound_port: host.port,
          outbound_transport: outbound.transport ?? current?.outbound_transport ?? 'udp',
          outbound_username: auth.username,
          outbound_password: auth.password,
          outbound_caller_ids: checked.callerIds ?? current?.outbound_caller_ids ?? [],
        });
      }
    }
    return write;
  }

  async create(workspaceId: string, body: CreateRequest): Promise<SipTrunk> {
    const checked = await this.checkFields(body);
    const id = newId('sipTrunk');
    const write = this.merge(id, null, { ...body, inbound: body.inbound ?? null, outbound: body.outbound ?? null }, checked);
    const values: TrunkValues = {
      name: body.name,
      inbound: false,
      inbound_username: null,
      inbound_password: null,
      outbound: false,
      outbound_host: null,
      outbound_port: null,
      outbound_transport: null,
      outbound_username: null,
      outbound_password: null,
      outbound_caller_ids: [],
      ...write.values,
    };
    const stored = await this.store.insert(
      { id, workspace_id: workspaceId, ...values },
      { sources: write.sources ?? [], numbers: write.numbers ?? [], requestedNumbers: write.requestedNumbers ?? [] },
      this.limits,
    );
    return this.toSipTrunk(stored);
  }

  async list(workspaceId: string, params: PageParams): Promise<Page<SipTrunk>> {
    const page = await this.store.list(workspaceId, params);
    return { ...page, data: page.data.map((t) => this.toSipTrunk(t)) };
  }

  async get(workspaceId: string, trunkId: string): Promise<SipTrunk> {
    return this.toSipTrunk(await this.owned(workspaceId, trunkId));
  }

  async update(workspaceId: string, trunkId: string, body: UpdateRequest): Promise<SipTrunk> {
    await this.owned(workspaceId, trunkId);
    const checked = await this.checkFields(body);
    const stored = await this.store.transaction(async (trx) => {
      const current = await this.store.findForUpdate(trx, trunkId);
      if (!current) throw sipTrunkNotFound(trunkId);
      if (current.workspace_id !== workspaceId) throw otherWorkspace('SIP trunk');
      const write = this.merge(trunkId, current, body, checked);
      if (Object.keys(write.values).length === 0 && !write.sources && !write.numbers) return current;
      return this.store.update(trx, current, write, this.limits);
    });
    return this.toSipTrunk(stored);
  }

  async delete(workspaceId: string, trunkId: string): Promise<{ status: 'deleted'; trunk_id: string }> {
    await this.owned(workspaceId, trunkId);
    if (!(await this.store.delete(workspaceId, trunkId))) throw sipTrunkNotFound(trunkId);
    return { status: 'deleted', trunk_id: trunkId };
  }

  /** An agent's `sip_config`: a trunk of the workspace (404/403) that delivers the number (422). */
  async checkAgentNumber(workspaceId: string, trunkId: string, phoneNumber: string): Promise<void> {
    const trunk = await this.owned(workspaceId, trunkId, 'sip_config.trunk_id');
    if (!trunk.numbers.includes(phoneNumber))
      throw unprocessable('sip_number_not_on_trunk', `The SIP trunk ${trunkId} does not deliver ${phoneNumber}.`, 'sip_config.phone_number');
  }
}
