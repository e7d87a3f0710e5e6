/** Calls: a call placed (agent, number, carrier), the list (by status), and one call with its transcript, analysis, structured results, tool calls and webhook deliveries. */
import { useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { AgentSelect, ProviderSelect } from '../pickers.js';
import { navigate } from '../router.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, MoreButton, Status, When, formValue, useAction, useInterval, useLoad, usePaged } from '../ui.js';
import { DeliveryTable } from './deliveries.js';
import { useLiveFeed, type LiveFeed } from '../live-events.js';

type CallStatus = Schemas['CallStatus'];
const STATUSES: CallStatus[] = ['queued', 'initiated', 'ringing', 'in_progress', 'completed', 'busy', 'no_answer', 'failed', 'canceled', 'voicemail'];
const LIVE: CallStatus[] = ['queued', 'initiated', 'ringing', 'in_progress'];

/** An outbound call: an agent, the number, and the carrier (left empty: the agent's one configured carrier). */
function PlaceCall() {
  const agents = useLoad(async () => (await ok(api.GET('/api/v1/agents', { params: { query: { limit: 100 } } }))).data, []);
  const place = useAction(async (form: HTMLFormElement) => {
    const v = (name: string) => formValue(form, name);
    const call = await ok(
      api.POST('/api/v1/calls', {
        body: {
          agent_id: v('agent_id'),
          to_number: v('to_number'),
          ...(v('provider') ? { provider: v('provider') as Schemas['Provider'] } : {}),
          ...(v('first_message') ? { first_message: v('first_message') } : {}),
        },
      }),
    );
    navigate('calls', call.call_id);
  });
  return (
    <ActionForm action={place} label="Place a call">
      <h2>Place a call</h2>
      <ErrorNote error={agents.error} />
      <div class="row">
        <AgentSelect agents={agents.data} />
        <Field label="Number to call" hint="E.164, e.g. +14155550123.">
          <input name="to_number" required maxLength={16} autoComplete="off" />
        </Field>
        <ProviderSelect label="Carrier" hint="Through the agent's account there, or for sip the SIP trunk it is bound to." />
        <Field label="First message" hint="Empty: the agent's own.">
          <input name="first_message" maxLength={2000} />
        </Field>
      </div>
      <ErrorNote error={place.error} />
      <button type="submit" disabled={place.busy}>
        Call
      </button>
    </ActionForm>
  );
}

export function CallsPage({ session }: { session: SignedIn }) {
  const [status, setStatus] = useState<CallStatus | ''>('');
  const calls = usePaged(
    (starting_after) => ok(api.GET('/api/v1/calls', { params: { query: { limit: 50, starting_after, ...(status ? { status } : {}) } } })),
    [status],
  );
  return (
    <section>
      <h1>Calls</h1>
      {canWrite(session) && <PlaceCall />}
      <label class="inline-label">
        Status{' '}
        <select value={status} onChange={(e) => setStatus(e.currentTarget.value as CallStatus | '')}>
          <option value="">any</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s.replace(/_/g, ' ')}
            </option>
          ))}
        </select>
      </label>
      <ErrorNote error={calls.error} />
      <Loading when={calls.loading && calls.items.length === 0} />
      <table>
        <thead>
          <tr>
            <th>Call</th>
            <th>Direction</th>
            <th>From</th>
            <th>To</th>
            <th>Status</th>
            <th>Duration</th>
            <th>Started</th>
          </tr>
        </thead>
        <tbody>
          {calls.items.map((c) => (
            <tr key={c.call_id}>
              <td>
                <a href={`#/calls/${c.call_id}`}>
                  <code>{c.call_id}</code>
                </a>
              </td>
              <td>{c.direction}</td>
              <td>{c.from_number}</td>
              <td>{c.to_number}</td>
              <td>
                <Status value={c.status} />
              </td>
              <td>{c.duration} s</td>
              <td>
                <When iso={c.created_at} />
              </td>
            </tr>
          ))}
          {!calls.loading && calls.items.length === 0 && (
            <tr>
              <td colSpan={7} class="muted">
                No calls.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <MoreButton list={calls} />
    </section>
  );
}

function Analysis({ call }: { call: Schemas['Call'] }) {
  const yesNo = (v: boolean | null) => (v === null ? '—' : v ? 'yes' : 'no');
  return (
    <dl class="facts">
      <dt>Summary</dt>
      <dd>{call.summary ?? <span class="muted">none yet</span>}</dd>
      <dt>Sentiment</dt>
      <dd>{call.sentiment ?? '—'}</dd>
      <dt>Goal met</dt>
      <dd>{yesNo(call.goal_met)}</dd>
      <dt>Needs review</dt>
      <dd>{yesNo(call.needs_review)}</dd>
      <dt>Unanswered questions</dt>
      <dd>
        {call.unanswered_questions.length ? (
          <ul>
            {call.unanswered_questions.map((q, i) => (
              <li key={i}>{q}</li>
            ))}
          </ul>
        ) : (
          '—'
        )}
      </dd>
      <dt>Interruptions</dt>
      <dd>{call.interruption_count}</dd>
      <dt>Average latency</dt>
      <dd>{call.latency_avg_ms === null ? '—' : `${Math.round(call.latency_avg_ms)} ms`}</dd>
    </dl>
  );
}

function ResultError({ error }: { error: Schemas['AnalysisError'] | null | undefined }) {
  if (!error) return <span class="muted">none yet</span>;
  return (
    <span class="error-text">
      none: <code>{error.code}</code> ({error.message})
    </span>
  );
}

/** The structured results of the agent's analysis setting, when the call ran with one. */
function Results({ call }: { call: Schemas['Call'] }) {
  if (!('data' in call) && !('success' in call)) return null;
  return (
    <>
      <h2>Results</h2>
      <dl class="facts">
        {'data' in call && (
          <>
            <dt>Data</dt>
            <dd>{call.data ? <pre class="data">{JSON.stringify(call.data, null, 2)}</pre> : <ResultError error={call.data_error} />}</dd>
          </>
        )}
        {'success' in call && (
          <>
            <dt>Success</dt>
            <dd>
              {call.success ? (
                <>
                  <strong>{call.success.met ? 'met' : 'not met'}</strong> — {call.success.reason}
                </>
              ) : (
                <ResultError error={call.success_error} />
              )}
            </dd>
          </>
        )}
      </dl>
    </>
  );
}

export function CallPage({ session, callId }: { session: SignedIn; callId: string }) {
  const call = useLoad(() => ok(api.GET('/api/v1/calls/{call_id}', { params: { path: { call_id: callId } } })), [callId]);
  const deliveries = useLoad(
    async () => (await ok(api.GET('/api/v1/calls/{call_id}/webhook-deliveries', { params: { path: { call_id: callId } } }))).data,
    [callId],
  );
  const live = !!call.data && LIVE.includes(call.data.status);
  // A live call is followed through its event stream; the record is reloaded when its status moves
  // (and every 2 s only if the stream cannot be had).
  const feed = useLiveFeed(`/api/v1/calls/${callId}/events`, live, () => call.reload());
  useInterval(() => call.reload(), 2000, live && feed.state === 'failed');
  const hangup = useAction(async () => {
    await ok(api.POST('/api/v1/calls/{call_id}/hangup', { params: { path: { call_id: callId } } }));
    call.reload();
  });
  const c = call.data;
  if (!c)
    return (
      <section>
        <ErrorNote error={call.error} />
        <Loading when={call.loading} />
      </section>
    );
  return (
    <section>
      <p>
        <a href="#/calls">← Calls</a>
      </p>
      <h1>
        Call <code>{c.call_id}</code>
      </h1>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <Status value={c.status} />
          {c.end_reason && <span class="muted"> ({c.end_reason.replace(/_/g, ' ')})</span>}
        </dd>
        <dt>Agent</dt>
        <dd>
          <a href={`#/agents/${c.agent_id}`}>
            <code>{c.agent_id}</code>
          </a>
        </dd>
        {c.batch_id && (
          <>
            <dt>Batch</dt>
            <dd>
              <a href={`#/batches/${c.batch_id}`}>
                <code>{c.batch_id}</code>
              </a>
            </dd>
          </>
        )}
        <dt>Direction</dt>
        <dd>
          {c.direction} via {c.provider}
        </dd>
        <dt>From → to</dt>
        <dd>
          {c.from_number} → {c.to_number}
        </dd>
        <dt>Answered by</dt>
        <dd>{c.answered_by ?? '—'}</dd>
        <dt>Created</dt>
        <dd>
          <When iso={c.created_at} />
        </dd>
        <dt>Answered</dt>
        <dd>
          <When iso={c.answered_at} />
        </dd>
        <dt>Ended</dt>
        <dd>
          <When iso={c.ended_at} />
        </dd>
        <dt>Duration</dt>
        <dd>
          {c.duration} s, {c.message_count} messages
        </dd>
      </dl>
      {live && canWrite(session) && (
        <p>
          <button type="button" class="danger" disabled={hangup.busy} onClick={() => void hangup.run()}>
            Hang up
          </button>
          <ErrorNote error={hangup.error} />
        </p>
      )}
      <Recording session={session} call={c} reload={() => call.reload()} />
      <h2>Transcript</h2>
      {live && feed.state !== 'off' && feed.state !== 'failed' ? (
        <LiveTranscript feed={feed} />
      ) : c.transcript.length === 0 ? (
        <p class="muted">Nothing said yet.</p>
      ) : (
        <ol class="transcript">
          {c.transcript.map((t, i) => (
            <li key={i} class={`turn turn-${t.role}${t.dtmf === undefined ? '' : ' turn-keys'}`}>
              <span class="who">{t.role === 'model' ? 'Agent' : 'Caller'}</span> {t.dtmf === undefined ? t.text : <Keys keys={t.dtmf} />}
            </li>
          ))}
        </ol>
      )}
      {c.transcript_truncated && <p class="muted">The transcript was cut at its size limit.</p>}
      <h2>Analysis</h2>
      <Analysis call={c} />
      <Results call={c} />
      <h2>Tool calls</h2>
      {c.tool_calls.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th>Tool</th>
              <th>Source</th>
              <th>Arguments</th>
              <th>Result</th>
              <th>Time</th>
            </tr>
          </thead>
          <tbody>
            {c.tool_calls.map((t, i) => (
              <tr key={i}>
                <td>{t.name}</td>
                <td>{t.source}</td>
                <td>
                  <pre>{JSON.stringify(t.arguments, null, 1)}</pre>
                </td>
                <td>{t.ok ? <pre>{JSON.stringify(t.result, null, 1)?.slice(0, 2000)}</pre> : <span class="error-text">{t.error}</span>}</td>
                <td>{t.duration_ms} ms</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Webhook deliveries</h2>
      <ErrorNote error={deliveries.error} />
      {deliveries.data && <DeliveryTable deliveries={deliveries.data} />}
    </section>
  );
}

/** The call as it is spoken: finished utterances, notes (tools, interruptions, transfer), and what each side is saying now. */
function LiveTranscript({ feed }: { feed: LiveFeed }) {
  const who = (role: 'model' | 'user') => (role === 'model' ? 'Agent' : 'Caller');
  return (
    <>
      <p class="muted live-state" aria-live="polite">
        {feed.state === 'live'
          ? `Following live${feed.status ? ` (${feed.status.replace(/_/g, ' ')})` : ''}`
          : feed.state === 'ended'
            ? 'The call ended.'
            : 'Connecting…'}
      </p>
      <ol class="transcript live">
        {feed.lines.map((l, i) =>
          l.kind === 'note' ? (
            <li key={i} class="turn turn-note muted">
              {l.text}
            </li>
          ) : (
            <li key={i} class={`turn turn-${l.role}${l.dtmf === undefined ? '' : ' turn-keys'}`}>
              <span class="who">{who(l.role)}</span> {l.dtmf === undefined ? l.text : <Keys keys={l.dtmf} />}
            </li>
          ),
        )}
        {(['user', 'model'] as const).map((role) =>
          feed.partial[role] ? (
            <li key={`partial-${role}`} class={`turn turn-${role} turn-partial`}>
              <span class="who">{who(role)}</span> {feed.partial[role]}…
            </li>
          ) : null,
        )}
      </ol>
    </>
  );
}

/** The call's two-channel recording: a player on its signed link (no API key needed), its facts, and deletion. */
function Recording({ session, call, reload }: { session: SignedIn; call: Schemas['Call']; reload: () => void }) {
  const remove = useAction(async () => {
    if (!confirm('Delete this recording? This cannot be undone.')) return;
    await ok(api.DELETE('/api/v1/calls/{call_id}/recording', { params: { path: { call_id: call.call_id } } }));
    reload();
  });
  const r = call.recording;
  if (!r || !call.recording_url) return null;
  return (
    <>
      <h2>Recording</h2>
      <audio class="recording" controls preload="none" src={call.recording_url} aria-label="Call recording" />
      <p class="muted">
        {r.status === 'recording' ? 'Recording so far: ' : ''}
        {r.duration.toFixed(1)} s, {(r.size_bytes / 1024).toFixed(0)} KiB, caller on the left, agent on the right
        {r.truncated ? ' (cut at the size limit)' : ''}.{' '}
        <a href={call.recording_url} download={`${call.call_id}.wav`}>
          Download
        </a>
      </p>
      {canWrite(session) && (
        <p>
          <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run()}>
            Delete recording
          </button>
          <ErrorNote error={remove.error} />
        </p>
      )}
    </>
  );
}

/** Keys pressed on the phone keypad (a transcript entry marked `dtmf`): each key as a key cap, pauses as their length. */
function Keys({ keys }: { keys: string }) {
  return (
    <span class="keys" aria-label={`pressed keys ${keys}`}>
      <span class="muted">pressed</span>
      {[...keys].map((k, i) =>
        k === 'w' || k === 'W' ? (
          <span key={i} class="muted">
            {k === 'w' ? '0.5 s' : '1 s'}
          </span>
        ) : (
          <kbd key={i}>{k}</kbd>
        ),
      )}
    </span>
  );
}
