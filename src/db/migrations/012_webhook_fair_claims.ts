import type { Knex } from 'knex';

/**
 * Fair claims of webhook deliveries (WebhookStore.claim): pending deliveries indexed by workspace, and
 * the claim itself as a function. The dispatcher walks the workspaces that have pending deliveries
 * (a loose index scan over the new index) and takes a fair share from each, instead of the oldest
 * deliveries overall. A PL/pgSQL function because the claim runs after every delivery and its plan,
 * cached per connection there, costs more to make than to run.
 *
 * A workspace may take up to its share of the slots outside the reserve (`pool` divided among the
 * workspaces with deliveries pending or in flight) while more than `reserve` slots stay free; one with
 * nothing in flight may always take one (from the reserve if need be). Deliveries are taken round
 * robin: each workspace's oldest, then each one's second oldest, and so on.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`create index webhook_deliveries_pending_by_workspace on webhook_deliveries (workspace_id, id) where state = 'pending'`);
  await knex.raw(`
    create function claim_webhook_deliveries(after_ws text, scan int, inflight jsonb, pool int, free int, reserve int)
    returns table (
      id text, event_id text, workspace_id text, webhook_id text, kind text, call_id text, batch_id text,
      target_url text, url_key text, state text, status text, status_code int, error text, signed boolean,
      duration_ms int, attempted_at timestamptz, created_at timestamptz,
      body text, secret_sealed text, previous_secret_sealed text, previous_expires_at timestamptz, scan_end text
    )
    rows 16
    language plpgsql as $$
    #variable_conflict use_column
    begin
      return query
      with recursive ws(w, n) as (
          (select d.workspace_id, 1 from webhook_deliveries d
            where d.state = 'pending' and d.workspace_id > after_ws order by d.workspace_id limit 1)
        union all
          (select (select d.workspace_id from webhook_deliveries d
                    where d.state = 'pending' and d.workspace_id > ws.w order by d.workspace_id limit 1), ws.n + 1
             from ws where ws.w is not null and ws.n < scan)
      ),
      pending_ws as (select ws.w from ws where ws.w is not null),
      busy(w, k) as (select key, value::int from jsonb_each_text(inflight)),
      share as (select greatest(1, pool / greatest(1, count(*)))::int as cap
                  from (select p.w from pending_ws p union select b.w from busy b) a),
      budget as (
        select p.w, greatest(case when coalesce(b.k, 0) = 0 then 1 else 0 end,
                             least((select cap from share) - coalesce(b.k, 0), free - reserve)) as n
          from pending_ws p left join busy b on b.w = p.w
      ),
      picked as (
        select c.id, c.rn from budget bu cross join lateral (
          select q.id, row_number() over (order by q.id) as rn from (
            select d.id from webhook_deliveries d
             where d.state = 'pending' and d.workspace_id = bu.w
             order by d.workspace_id, d.id limit bu.n for update skip locked) q
        ) c
        where bu.n > 0
      ),
      chosen as (select pk.id from picked pk order by pk.rn, pk.id limit free),
      claimed as (
        update webhook_deliveries d set state = 'sending', claimed_at = now()
          from chosen ch where d.id = ch.id
        returning d.*
      )
      -- What sending needs is read in this statement: a caller joining on the ids in its own statement
      -- would use a snapshot taken before this function's, which may not show a delivery committed since.
      select cl.id, cl.event_id, cl.workspace_id, cl.webhook_id, cl.kind, cl.call_id, cl.batch_id,
             cl.target_url, cl.url_key, cl.state, cl.status, cl.status_code, cl.error, cl.signed,
             cl.duration_ms, cl.attempted_at, cl.created_at,
             e.body, s.secret_sealed, s.previous_secret_sealed, s.previous_expires_at,
             (select case when count(*) >= scan then max(p.w) end from pending_ws p)
        from claimed cl
        join webhook_events e on e.id = cl.event_id
        left join webhook_secrets s on s.workspace_id = cl.workspace_id
       order by cl.id;
    end
    $$`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop function if exists claim_webhook_deliveries(text, int, jsonb, int, int, int)');
  await knex.raw('drop index if exists webhook_deliveries_pending_by_workspace');
}
