/**
 * The `reservations` rows (one per live conversation that holds credit and plan minutes) and the
 * figures the reservation rule reads. Every function here runs inside a transaction that already holds
 * the workspace's advisory lock (AdmissionStore takes it), so what is read and what is written are one
 * decision for every instance sharing the database. Expiry is on the database clock, like the slots'.
 */
import type { Knex } from 'knex';
import type { UsageKind } from './terms.js';
import { holding, type ReservationAsk, type WorkspaceFunds } from './reservations.js';

export interface ReservationRow {
  id: string;
  workspace_id: string;
  kind: UsageKind;
  minutes: number;
  cents: number;
  seconds: number;
  expires_at: Date;
}

const live = (trx: Knex.Transaction) => trx('reservations').where('expires_at', '>', trx.fn.now());
const expiresIn = (trx: Knex.Transaction, ms: number) => trx.raw(`now() + ? * interval '1 millisecond'`, [ms]);

/** The workspace's balance, what its live reservations other than `exceptId` hold, and (limited plans) its plan use this month. */
export async function fundsOf(
  trx: Knex.Transaction,
  workspaceId: string,
  ask: Pick<ReservationAsk, 'planSeconds' | 'monthStart'>,
  exceptId: string | null,
): Promise<WorkspaceFunds | undefined> {
  // The balance and what the others hold in one statement.
  const others = live(trx).where('workspace_id', workspaceId);
  if (exceptId) others.whereNot('id', exceptId);
  const held = others.select(trx.raw('coalesce(sum(cents), 0)::bigint as cents'), trx.raw('coalesce(sum(seconds), 0)::bigint as seconds'));
  const ws = (await trx
    .with('held', held)
    .from('workspaces')
    .where({ id: workspaceId })
    .first('credit_balance_cents', trx.raw('(select cents from held) as cents'), trx.raw('(select seconds from held) as seconds'))) as
    { credit_balance_cents: string | number; cents: string; seconds: string } | undefined;
  if (!ws) return undefined;
  let usedSeconds = 0;
  if (ask.planSeconds !== null) {
    const [{ total }] = await trx('usage_records')
      .where('workspace_id', workspaceId)
      .where('started_at', '>=', ask.monthStart)
      .sum<{ total: string | null }[]>('seconds as total');
    usedSeconds = Number(total ?? 0);
  }
  return {
    balanceCents: Number(ws.credit_balance_cents),
    othersCents: Number(ws.cents),
    othersSeconds: Number(ws.seconds),
    usedSeconds,
  };
}

/** Writes (or replaces) the reservation of conversation `id`. */
export async function putReservation(trx: Knex.Transaction, id: string, workspaceId: string, ask: ReservationAsk, minutes: number): Promise<void> {
  await putReservations(trx, workspaceId, ask, [{ id, minutes }]);
}

/** Writes (or replaces) the reservations of several conversations of one workspace, in one statement. */
export async function putReservations(
  trx: Knex.Transaction,
  workspaceId: string,
  ask: ReservationAsk,
  held: Array<{ id: string; minutes: number }>,
): Promise<void> {
  if (!held.length) return;
  await trx('reservations')
    .insert(
      held.map(({ id, minutes }) => {
        const { cents, seconds } = holding(minutes, ask);
        return { id, workspace_id: workspaceId, kind: ask.kind, minutes, cents, seconds, expires_at: expiresIn(trx, ask.expiryMs) };
      }),
    )
    .onConflict('id')
    .merge(['minutes', 'cents', 'seconds', 'expires_at']);
}

/** The live reservation of conversation `id` (undefined when it has none or it expired). */
export async function liveReservation(trx: Knex.Transaction | Knex, id: string): Promise<ReservationRow | undefined> {
  return (await trx('reservations')
    .where({ id })
    .where('expires_at', '>', trx.fn.now())
    .first('id', 'workspace_id', 'kind', 'minutes', 'cents', 'seconds', 'expires_at')) as ReservationRow | undefined;
}

/** The delete of conversation `id`'s reservation, unrun (to put in another statement's `with`). */
export function releasingReservation(trx: Knex.Transaction | Knex, id: string): Knex.QueryBuilder {
  return trx('reservations').where({ id }).delete();
}

export async function deleteReservation(trx: Knex.Transaction | Knex, id: string): Promise<void> {
  await releasingReservation(trx, id);
}
