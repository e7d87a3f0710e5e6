/**
 * SIP trunks in PostgreSQL (migration 034): the trunk row, its allowed sources (`cidr`) and the numbers
 * it delivers. Passwords arrive sealed; the store never sees plaintext.
 */
import type { Knex } from 'knex';
import { conflict, unprocessable } from '../errors/api-error.js';
import { isForeignKeyViolation, isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type Page, type PageParams } from '../lib/pagination.js';

export type SipTransport = 'udp' | 'tcp' | 'tls';

export interface TrunkRow {
  id: string;
  workspace_id: string;
  name: string;
  inbound: boolean;
  inbound_username: string | null;
  /** Sealed. */
  inbound_password: string | null;
  outbound: boolean;
  outbound_host: string | null;
  outbound_port: number | null;
  outbound_transport: SipTransport | null;
  outbound_username: string | null;
  /** Sealed. */
  outbound_password: string | null;
  outbound_caller_ids: string[];
  created_at: Date;
  updated_at: Date;
}

/** A trunk with its lists: sources as stored `cidr` text and numbers, each in text order. */
export interface StoredTrunk extends TrunkRow {
  sources: string[];
  numbers: string[];
}

export type TrunkValues = Omit<TrunkRow, 'id' | 'workspace_id' | 'created_at' | 'updated_at'>;

/** What one write sets: the row's values, and each list when it changes (replaced as a whole). */
export interface TrunkWrite {
  values: Partial<TrunkValues>;
  sources?: string[];
  numbers?: string[];
  /** The numbers as the request listed them, so a refusal names the request's index. */
  requestedNumbers?: string[];
}

export interface TrunkLimits {
  trunksPerWorkspace: number;
  numbersPerWorkspace: number;
}

/** What `authorizeInbound` reads of the trunk delivering a number, with the INVITE's source matched by PostgreSQL. */
export interface InboundTrunk {
  id: string;
  workspace_id: string;
  name: string;
  inbound_username: string | null;
  inbound_password: string | null;
  /** Whether the trunk lists sources at all (empty: any source, with credentials). */
  restricted: boolean;
  source_allowed: boolean;
}

export const trunkLimitReached = (limit: number) =>
  unprocessable('sip_trunk_limit_reached', `A workspace can have at most ${limit} SIP trunks; delete one first.`);

const numberTaken = (number: string, param: string) => conflict('sip_number_taken', `${number} is already delivered by another SIP trunk.`, param);

export class SipTrunkStore {
  constructor(private readonly db: Knex) {}

  transaction<T>(fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
    return this.db.transaction(fn);
  }

  private async withLists(rows: TrunkRow[], trx: Knex = this.db): Promise<StoredTrunk[]> {
    if (rows.length === 0) return [];
    const ids = rows.map((r) => r.id);
    const [sources, numbers] = await Promise.all([
      trx('sip_trunk_sources').whereIn('trunk_id', ids).orderBy(['trunk_id', 'source']).select('trunk_id', trx.raw('source::text as source')),
      trx('sip_trunk_numbers').whereIn('trunk_id', ids).orderBy(['trunk_id', 'number']).select('trunk_id', 'number'),
    ]);
    return rows.map((r) => ({
      ...r,
      sources: (sources as { trunk_id: string; source: string }[]).filter((s) => s.trunk_id === r.id).map((s) => s.source),
      numbers: (numbers as { trunk_id: string; number: string }[]).filter((n) => n.trunk_id === r.id).map((n) => n.number),
    }));
  }

  /** By id alone, so callers can tell "another workspace's" (403) from "none" (404). */
  async find(id: string, trx: Knex = this.db): Promise<StoredTrunk | undefined> {
    const row: TrunkRow | undefined = await trx('sip_trunks').where({ id }).first();
    return row ? (await this.withLists([row], trx))[0] : undefined;
  }

  async findForUpdate(trx: Knex.Transaction, id: string): Promise<StoredTrunk | undefined> {
    const row: TrunkRow | undefined = await trx('sip_trunks').where({ id }).forUpdate().first();
    return row ? (await this.withLists([row], trx))[0] : undefined;
  }

  async list(workspaceId: string, params: PageParams): Promise<Page<StoredTrunk>> {
    const page = await paginate<TrunkRow, TrunkRow>(this.db('sip_trunks').where({ workspace_id: workspaceId }).select('*'), params, (r) => r);
    return { ...page, data: await this.withLists(page.data) };
  }

  /**
   * Creates a trunk under the workspace's row lock, so two creations cannot both pass the limits
   * (the same lock webhooks take for theirs).
   */
  async insert(
    row: { id: string; workspace_id: string } & TrunkValues,
    lists: { sources: string[]; numbers: string[]; requestedNumbers: string[] },
    limits: TrunkLimits,
  ): Promise<StoredTrunk> {
    return this.db.transaction(async (trx) => {
      await trx('workspaces').where({ id: row.workspace_id }).forUpdate().first('id');
      const [{ count }] = await trx('sip_trunks').where({ workspace_id: row.workspace_id }).count<{ count: string }[]>('* as count');
      if (Number(count) >= limits.trunksPerWorkspace) throw trunkLimitReached(limits.trunksPerWorkspace);
      await this.checkNumberLimit(trx, row.workspace_id, row.id, lists.numbers.length, limits.numbersPerWorkspace);
      await this.checkNumbersFree(trx, row.id, lists.numbers, lists.requestedNumbers);
      await trx('sip_trunks').insert({ ...row, outbound_caller_ids: row.outbound_caller_ids });
      await this.writeSources(trx, row.id, lists.sources);
      await this.addNumbers(trx, row.workspace_id, row.id, lists.numbers);
      return (await this.find(row.id, trx)) as StoredTrunk;
    });
  }

  /** Writes a change onto a trunk whose row the caller holds locked (findForUpdate in `trx`). */
  async update(trx: Knex.Transaction, trunk: StoredTrunk, write: TrunkWrite, limits: TrunkLimits): Promise<StoredTrunk> {
    if (write.numbers) {
      const next = write.numbers;
      await trx('workspaces').where({ id: trunk.workspace_id }).forUpdate().first('id');
      await this.checkNumberLimit(trx, trunk.workspace_id, trunk.id, next.length, limits.numbersPerWorkspace);
      const added = next.filter((n) => !trunk.numbers.includes(n));
      const removed = trunk.numbers.filter((n) => !next.includes(n));
      await this.checkNumbersFree(trx, trunk.id, added, write.requestedNumbers ?? next);
      if (removed.length) {
        try {
          await trx('sip_trunk_numbers').where({ trunk_id: trunk.id }).whereIn('number', removed).delete();
        } catch (err) {
          // An agent answers one of them (migration 034's foreign key, checked by the database).
          if (isForeignKeyViolation(err, 'agents_sip_number_fk'))
            throw conflict(
              'sip_number_in_use',
              'An agent answers a number this change removes from the trunk; change its sip_config first.',
              'inbound.numbers',
            );
          throw err;
        }
      }
      await this.addNumbers(trx, trunk.workspace_id, trunk.id, added);
    }
    if (write.sources) {
      await trx('sip_trunk_sources').where({ trunk_id: trunk.id }).delete();
      await this.writeSources(trx, trunk.id, write.sources);
    }
    await trx('sip_trunks')
      .where({ id: trunk.id })
      .update({ ...write.values, updated_at: trx.fn.now() });
    return (await this.find(trunk.id, trx)) as StoredTrunk;
  }

  /** False when the workspace has no such trunk; 409 `sip_trunk_in_use` while an agent answers one of its numbers. */
  async delete(workspaceId: string, id: string): Promise<boolean> {
    try {
      return (await this.db('sip_trunks').where({ id, workspace_id: workspaceId }).delete()) > 0;
    } catch (err) {
      if (isForeignKeyViolation(err, 'agents_sip_number_fk'))
        throw conflict('sip_trunk_in_use', 'An agent answers a number of this trunk; set its sip_config to null first.', 'trunk_id');
      throw err;
    }
  }

  private async checkNumberLimit(trx: Knex, workspaceId: string, trunkId: string, count: number, limit: number): Promise<void> {
    const [{ others }] = await trx('sip_trunk_numbers')
      .where({ workspace_id: workspaceId })
      .whereNot({ trunk_id: trunkId })
      .count<{ others: string }[]>('* as others');
    if (Number(others) + count > limit)
      throw unprocessable('sip_number_limit_reached', `A workspace's SIP trunks can deliver at most ${limit} numbers in all.`, 'inbound.numbers');
  }

  /** 409 naming the first number another trunk delivers (`positions`: the list the request's indexes refer to). */
  private async checkNumbersFree(trx: Knex, trunkId: string, numbers: string[], positions: string[]): Promise<void> {
    if (numbers.length === 0) return;
    const taken: { number: string }[] = await trx('sip_trunk_numbers').whereIn('number', numbers).whereNot({ trunk_id: trunkId }).select('number');
    if (taken.length) {
      const first = positions.find((n) => taken.some((t) => t.number === n)) as string;
      throw numberTaken(first, `inbound.numbers[${positions.indexOf(first)}]`);
    }
  }

  private async addNumbers(trx: Knex, workspaceId: string, trunkId: string, numbers: string[]): Promise<void> {
    if (numbers.length === 0) return;
    try {
      await trx('sip_trunk_numbers').insert(numbers.map((number) => ({ number, trunk_id: trunkId, workspace_id: workspaceId })));
    } catch (err) {
      // Another trunk took one between the check and the insert.
      if (isUniqueViolation(err, 'sip_trunk_numbers_pkey')) throw numberTaken(numbers.length === 1 ? numbers[0] : 'A number', 'inbound.numbers');
      throw err;
    }
  }

  private async writeSources(trx: Knex, trunkId: string, sources: string[]): Promise<void> {
    if (sources.length) await trx('sip_trunk_sources').insert(sources.map((source) => ({ trunk_id: trunkId, source })));
  }

  /** The trunk delivering `number` inbound, with whether `source` is among its allowed sources. */
  async inboundTrunkFor(number: string, source: string): Promise<InboundTrunk | undefined> {
    const row = await this.db('sip_trunk_numbers as n')
      .join('sip_trunks as t', 't.id', 'n.trunk_id')
      .where({ 'n.number': number, 't.inbound': true })
      .first(
        't.id',
        't.workspace_id',
        't.name',
        't.inbound_username',
        't.inbound_password',
        this.db.raw('exists (select 1 from sip_trunk_sources s where s.trunk_id = t.id) as restricted'),
        this.db.raw('exists (select 1 from sip_trunk_sources s where s.trunk_id = t.id and s.source >>= ?::inet) as source_allowed', [source]),
      );
    return row as InboundTrunk | undefined;
  }

  /**
   * Trunks that would trust this requester on their own terms: those listing `source` (GiST lookup),
   * and the digest-only ones (no sources) whose username is `username`. Bounded: a source or username
   * shared by more trunks than this is treated as trusted by none of the rest.
   */
  async peersOf(source: string, username: string | null, max = 20): Promise<InboundTrunk[]> {
    const bySource = this.db('sip_trunk_sources').whereRaw('source >>= ?::inet', [source]).select('trunk_id');
    const q = this.db('sip_trunks as t')
      .where('t.inbound', true)
      .where((w) => {
        w.whereIn('t.id', bySource);
        if (username !== null)
          w.orWhere((u) => u.where('t.inbound_username', username).whereNotExists(this.db('sip_trunk_sources as s').whereRaw('s.trunk_id = t.id')));
      })
      .limit(max)
      .select(
        't.id',
        't.workspace_id',
        't.name',
        't.inbound_username',
        't.inbound_password',
        this.db.raw('exists (select 1 from sip_trunk_sources s where s.trunk_id = t.id) as restricted'),
        this.db.raw('exists (select 1 from sip_trunk_sources s where s.trunk_id = t.id and s.source >>= ?::inet) as source_allowed', [source]),
      );
    return (await q) as InboundTrunk[];
  }

  /** Whether any trunk takes calls from any source with credentials (then every stranger is challenged). */
  async anyDigestOnlyTrunk(): Promise<boolean> {
    const row = await this.db('sip_trunks as t')
      .where('t.inbound', true)
      .whereNotNull('t.inbound_username')
      .whereNotExists(this.db('sip_trunk_sources as s').whereRaw('s.trunk_id = t.id'))
      .first(this.db.raw('1 as one'));
    return row !== undefined;
  }
}
