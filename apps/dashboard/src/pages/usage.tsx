/**
 * Usage and limits: the workspace's limits with what is in use now (`GET /api/v1/limits`), and its
 * billed minutes and conversations over the last 30 days by day and by agent (`GET /api/v1/usage`),
 * in the browser's time zone.
 */
import { api, ok } from '../api.js';
import type { Schemas } from '../api-types.js';
import { ErrorNote, Loading, useLoad } from '../ui.js';

type Figures = Schemas['UsageFigures'];

/** The browser's IANA zone when it is one the contract takes, else UTC. */
function browserZone(): string {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  return zone && /^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+){0,2}$/.test(zone) ? zone : 'UTC';
}

const money = (cents: number) => `$${(cents / 100).toFixed(2)}`;
const count = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const duration = (s: number) => (s % 3600 === 0 ? count(s / 3600, 'hour') : s % 60 === 0 ? count(s / 60, 'minute') : count(s, 'second'));

/** One limit: what is in use, what is allowed, and a meter when the limit is a number. */
function LimitRow({ name, used, of, value, max, note }: { name: string; used: string; of: string; value?: number; max?: number | null; note?: string }) {
  return (
    <tr>
      <th scope="row">{name}</th>
      <td>
        {used}
        {value !== undefined && max !== undefined && max !== null && max > 0 && (
          <>
            <br />
            <meter min={0} max={max} value={Math.min(value, max)} high={max * 0.8} optimum={0} aria-label={`${name} in use`} />
          </>
        )}
      </td>
      <td>
        {of}
        {note && (
          <>
            <br />
            <small class="muted">{note}</small>
          </>
        )}
      </td>
    </tr>
  );
}

function Limits({ limits: l }: { limits: Schemas['WorkspaceLimits'] }) {
  const p = l.destination_policy;
  const pm = l.plan_minutes;
  return (
    <>
      {l.subscription_status !== 'active' && (
        <p class="error" role="alert">
          The subscription is <strong>{l.subscription_status.replace('_', ' ')}</strong>: new calls and web sessions are refused.
        </p>
      )}
      <table aria-label="Limits">
        <thead>
          <tr>
            <th>Limit</th>
            <th>In use now</th>
            <th>Allowed</th>
          </tr>
        </thead>
        <tbody>
          <LimitRow
            name="Concurrent conversations"
            used={`${l.concurrency.live} live (${count(l.concurrency.live_phone_calls, 'phone call')}, ${count(l.concurrency.live_web_sessions, 'web session')})`}
            of={`${l.concurrency.limit} at once`}
            value={l.concurrency.live}
            max={l.concurrency.limit}
          />
          <LimitRow
            name="Credit"
            used={`${money(l.credit.reserved_cents)} held by live conversations`}
            of={`${money(l.credit.balance_cents)} balance, ${money(l.credit.available_cents)} available`}
            value={l.credit.reserved_cents}
            max={l.credit.balance_cents}
          />
          <LimitRow
            name={`Plan minutes (${l.plan})`}
            used={`${pm.used} used, ${pm.reserved} held by live conversations`}
            of={pm.included === null ? 'unlimited' : `${pm.included} a month, ${pm.left} left`}
            value={pm.used + pm.reserved}
            max={pm.included}
            note={`Resets ${new Date(pm.resets_at).toLocaleDateString()}`}
          />
          <LimitRow
            name="Outbound calls today"
            used={`${p.calls_placed_today} placed`}
            of={p.daily_call_cap === null ? 'no daily cap' : `${p.daily_call_cap} a day (UTC)`}
            value={p.calls_placed_today}
            max={p.daily_call_cap}
          />
          <LimitRow
            name="Web sessions created"
            used={`${l.web_session_creation.per_hour.used} in the last hour, ${l.web_session_creation.per_day.used} in the last day`}
            of={`${l.web_session_creation.per_hour.limit} an hour, ${l.web_session_creation.per_day.limit} a day`}
          />
          <LimitRow name="Longest call" used="—" of={duration(l.max_call_duration_seconds)} />
          <LimitRow
            name="Destinations"
            used="—"
            of={`${p.allowed_countries === null ? 'every country' : p.allowed_countries.join(', ')}; ${p.allowed_number_types.join(', ').replace(/_/g, ' ')}`}
          />
          <LimitRow
            name="Prices"
            used="—"
            of={`phone calls ${money(l.prices.phone_call_cents_per_minute)}, web sessions ${money(l.prices.web_session_cents_per_minute)}, text sessions ${money(l.prices.text_session_cents_per_minute)} a started minute`}
          />
        </tbody>
      </table>
    </>
  );
}

function FigureCells({ f }: { f: Figures }) {
  return (
    <>
      <td>{f.conversations}</td>
      <td>{f.minutes}</td>
    </>
  );
}

/** The head of a table of phone and web figures by `first` (day, agent). */
function BreakdownHead({ first }: { first: string }) {
  return (
    <thead>
      <tr>
        <th>{first}</th>
        <th>Phone calls</th>
        <th>Phone minutes</th>
        <th>Web sessions</th>
        <th>Web minutes</th>
        <th>Cost</th>
      </tr>
    </thead>
  );
}

/**
 * Which agents are known by name: `complete` when the list held every agent of the workspace, so an
 * id not in it is a deleted agent; else (the list failed, or had more pages) an unknown id is shown
 * by its id alone.
 */
type AgentNames = { names: Map<string, string>; complete: boolean };

function AgentName({ id, names: { names, complete } }: { id: string; names: AgentNames }) {
  const name = names.get(id);
  if (name !== undefined) return <a href={`#/agents/${id}`}>{name}</a>;
  return complete ? <span class="muted">deleted agent</span> : <a href={`#/agents/${id}`}>agent</a>;
}

function UsageView({ usage: u, names }: { usage: Schemas['Usage']; names: AgentNames }) {
  const busiest = Math.max(1, ...u.days.map((d) => d.phone.minutes + d.web.minutes));
  const active = u.days.filter((d) => d.phone.conversations + d.web.conversations > 0).reverse();
  return (
    <>
      <p class="muted">
        {u.from} to {u.to}, days in {u.timezone}. Minutes are billed minutes: every started minute of each conversation.
      </p>
      <table aria-label="Usage totals">
        <thead>
          <tr>
            <th />
            <th>Conversations</th>
            <th>Minutes</th>
            <th>Cost</th>
          </tr>
        </thead>
        <tbody>
          {(
            [
              ['Phone calls', u.totals.phone],
              ['Web sessions', u.totals.web],
              ['All', u.totals.all],
            ] as const
          ).map(([label, f]) => (
            <tr key={label}>
              <th scope="row">{label}</th>
              <FigureCells f={f} />
              <td>{money(f.cost_cents)}</td>
            </tr>
          ))}
        </tbody>
      </table>

      <h2>By day</h2>
      <div class="bars" role="img" aria-label={`Billed minutes a day from ${u.from} to ${u.to}`}>
        {u.days.map((d) => {
          const m = d.phone.minutes + d.web.minutes;
          return (
            <span key={d.date} title={`${d.date}: ${count(m, 'minute')}`}>
              <span class="bar-phone" style={{ height: `${(d.phone.minutes / busiest) * 100}%` }} />
              <span class="bar-web" style={{ height: `${(d.web.minutes / busiest) * 100}%` }} />
            </span>
          );
        })}
      </div>
      <p class="muted legend">
        <span class="swatch bar-phone" /> phone calls <span class="swatch bar-web" /> web sessions
      </p>
      <table aria-label="Usage by day">
        <BreakdownHead first="Day" />
        <tbody>
          {active.map((d) => (
            <tr key={d.date}>
              <td>{d.date}</td>
              <FigureCells f={d.phone} />
              <FigureCells f={d.web} />
              <td>{money(d.phone.cost_cents + d.web.cost_cents)}</td>
            </tr>
          ))}
          {active.length === 0 && (
            <tr>
              <td colSpan={6} class="muted">
                No conversations in these days.
              </td>
            </tr>
          )}
        </tbody>
      </table>

      <h2>By agent</h2>
      <table aria-label="Usage by agent">
        <BreakdownHead first="Agent" />
        <tbody>
          {u.agents.map((a) => (
            <tr key={a.agent_id}>
              <td>
                <AgentName id={a.agent_id} names={names} />
                <br />
                <small class="muted">
                  <code>{a.agent_id}</code>
                </small>
              </td>
              <FigureCells f={a.phone} />
              <FigureCells f={a.web} />
              <td>{money(a.phone.cost_cents + a.web.cost_cents)}</td>
            </tr>
          ))}
          {u.agents.length === 0 && (
            <tr>
              <td colSpan={6} class="muted">
                No agent had conversations in these days.
              </td>
            </tr>
          )}
        </tbody>
      </table>
    </>
  );
}

export function UsagePage() {
  const timezone = browserZone();
  const limits = useLoad(() => ok(api.GET('/api/v1/limits')), []);
  const usage = useLoad(() => ok(api.GET('/api/v1/usage', { params: { query: { timezone } } })), [timezone]);
  // Names for the agents with usage (a workspace with more agents than a page shows the rest by id).
  const agents = useLoad(() => ok(api.GET('/api/v1/agents', { params: { query: { limit: 100 } } })), []);
  const names: AgentNames = {
    names: new Map((agents.data?.data ?? []).map((a) => [a.agent_id, a.name])),
    complete: agents.data !== undefined && !agents.data.has_more,
  };
  return (
    <section>
      <h1>Usage and limits</h1>
      <h2>Limits</h2>
      <ErrorNote error={limits.error} />
      <Loading when={limits.loading && !limits.data} />
      {limits.data && <Limits limits={limits.data} />}
      <p>
        <button
          type="button"
          class="secondary"
          onClick={() => {
            limits.reload();
            usage.reload();
          }}
        >
          Refresh
        </button>
      </p>
      <h2>Last 30 days</h2>
      <ErrorNote error={usage.error ?? agents.error} />
      <Loading when={(usage.loading && !usage.data) || (agents.loading && !agents.data && !agents.error)} />
      {/* The breakdown waits for the names too, so an agent is never shown as deleted while they load. */}
      {usage.data && (agents.data || agents.error) && <UsageView usage={usage.data} names={names} />}
    </section>
  );
}
