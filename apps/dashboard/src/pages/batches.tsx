/**
 * Batches: the list, a new batch from a CSV file (rows the service skipped are listed with their line
 * and column), and one batch's progress, live while it runs, with cancel, pause and resume.
 */
import { useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { AgentSelect, ProviderSelect } from '../pickers.js';
import { navigate } from '../router.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, MoreButton, Status, When, formValue, useAction, useInterval, useLoad, usePaged } from '../ui.js';
import { DeliveryTable } from './deliveries.js';

type CsvForm = Schemas['BatchCsvUploadForm'];
type Skipped = Schemas['BatchSkippedRecipient'];
const RUNNING: Array<Schemas['BatchStatus']> = ['scheduled', 'queued', 'in_progress', 'paused'];

/** The CSV form's settings as the contract names them; empty inputs are left out (the service's defaults apply). */
function csvSettings(form: HTMLFormElement): Omit<CsvForm, 'file'> {
  const v = (n: string) => formValue(form, n) || undefined;
  const int = (n: string) => (v(n) === undefined ? undefined : Number(v(n)));
  const scheduled = v('scheduled_at');
  return {
    agent_id: formValue(form, 'agent_id'),
    name: formValue(form, 'name'),
    provider: v('provider') as CsvForm['provider'],
    scheduled_at: scheduled ? new Date(scheduled).toISOString() : undefined,
    webhook_url: v('webhook_url'),
    concurrency: int('concurrency'),
    retry_max_attempts: int('retry_max_attempts'),
    retry_delay_seconds: int('retry_delay_seconds'),
    retry_on: v('retry_on'),
    calling_window_start: v('calling_window_start'),
    calling_window_end: v('calling_window_end'),
    calling_window_timezone: v('calling_window_timezone'),
    calling_window_days: v('calling_window_days'),
  };
}

function SkippedRows({ items }: { items: Skipped[] }) {
  if (items.length === 0) return null;
  return (
    <div class="warning" role="status">
      <strong>{items.length === 1 ? '1 row was skipped' : `${items.length} rows were skipped`}:</strong>
      <ul class="skipped">
        {items.slice(0, 200).map((s) => (
          <li key={s.index}>
            {s.row !== null && <>Line {s.row}</>}
            {s.column && (
              <>
                , column <code>{s.column}</code>
              </>
            )}
            : {s.message}
          </li>
        ))}
      </ul>
    </div>
  );
}

function NewBatch({ onCreated }: { onCreated(batch: Schemas['Batch']): void }) {
  const agents = useLoad(async () => (await ok(api.GET('/api/v1/agents', { params: { query: { limit: 100 } } }))).data, []);
  const upload = useAction(async (form: HTMLFormElement) => {
    const file = (form.elements.namedItem('file') as HTMLInputElement).files?.[0];
    if (!file) throw new Error('Choose a CSV file.');
    const settings = csvSettings(form);
    const batch = await ok(
      api.POST('/api/v1/batches/csv', {
        // The contract types a binary part as a string; the serializer puts the chosen File in its place.
        body: { ...settings, file: file.name },
        bodySerializer: (body) => {
          const data = new FormData();
          for (const [k, value] of Object.entries(body)) if (value !== undefined && k !== 'file') data.append(k, String(value));
          data.append('file', file, file.name);
          return data;
        },
      }),
    );
    form.reset();
    onCreated(batch);
  });
  return (
    <ActionForm action={upload} label="New batch from a CSV file">
      <h2>New batch from a CSV file</h2>
      <p class="muted">
        A header row with a <code>to_number</code> column; an optional <code>first_message</code>; every other column is a placeholder of the row.
      </p>
      <div class="row">
        <Field label="CSV file">
          <input name="file" type="file" accept=".csv,text/csv" required />
        </Field>
        <AgentSelect agents={agents.data} />
        <Field label="Batch name">
          <input name="name" required maxLength={200} />
        </Field>
        <ProviderSelect label="Provider" hint="A carrier the agent is set up with (its account, or for sip the trunk number it is bound to)." />
      </div>
      <details>
        <summary>Schedule, concurrency, retries and calling window</summary>
        <div class="row">
          <Field label="Start at" hint="Empty: now.">
            <input name="scheduled_at" type="datetime-local" />
          </Field>
          <Field label="Concurrent calls" hint="Default 10.">
            <input name="concurrency" type="number" min={1} max={1000} />
          </Field>
          <Field label="Webhook URL">
            <input name="webhook_url" type="url" maxLength={2048} />
          </Field>
        </div>
        <div class="row">
          <Field label="Attempts per number" hint="Default 3.">
            <input name="retry_max_attempts" type="number" min={1} max={10} />
          </Field>
          <Field label="Seconds between attempts" hint="Default 900.">
            <input name="retry_delay_seconds" type="number" min={0} max={604800} />
          </Field>
          <Field label="Retry on" hint="Comma-separated: busy, no_answer, failed.">
            <input name="retry_on" maxLength={64} />
          </Field>
        </div>
        <div class="row">
          <Field label="Window opens">
            <input name="calling_window_start" type="time" />
          </Field>
          <Field label="Window closes">
            <input name="calling_window_end" type="time" />
          </Field>
          <Field label="Time zone" hint="e.g. America/New_York">
            <input name="calling_window_timezone" maxLength={64} />
          </Field>
          <Field label="Days" hint="e.g. mon,tue,wed,thu,fri">
            <input name="calling_window_days" maxLength={64} />
          </Field>
        </div>
      </details>
      <ErrorNote error={upload.error ?? agents.error} />
      <button type="submit" disabled={upload.busy}>
        Upload and start
      </button>
    </ActionForm>
  );
}

export function BatchesPage({ session }: { session: SignedIn }) {
  const batches = usePaged((starting_after) => ok(api.GET('/api/v1/batches', { params: { query: { limit: 50, starting_after } } })), []);
  return (
    <section>
      <h1>Batches</h1>
      {canWrite(session) && <NewBatch onCreated={(b) => navigate('batches', b.batch_id)} />}
      <ErrorNote error={batches.error} />
      <Loading when={batches.loading && batches.items.length === 0} />
      <table>
        <thead>
          <tr>
            <th>Batch</th>
            <th>Status</th>
            <th>Numbers</th>
            <th>Done</th>
            <th>Created</th>
          </tr>
        </thead>
        <tbody>
          {batches.items.map((b) => (
            <tr key={b.batch_id}>
              <td>
                <a href={`#/batches/${b.batch_id}`}>{b.name}</a>
              </td>
              <td>
                <Status value={b.status} />
              </td>
              <td>
                {b.total}
                {b.skipped.count > 0 && <span class="muted"> (+{b.skipped.count} skipped)</span>}
              </td>
              <td>
                {b.completed_count + b.failed_count + b.voicemail_count} / {b.total}
              </td>
              <td>
                <When iso={b.created_at} />
              </td>
            </tr>
          ))}
          {!batches.loading && batches.items.length === 0 && (
            <tr>
              <td colSpan={5} class="muted">
                No batches yet.
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <MoreButton list={batches} />
    </section>
  );
}

export function BatchPage({ session, batchId }: { session: SignedIn; batchId: string }) {
  const batch = useLoad(() => ok(api.GET('/api/v1/batches/{batch_id}', { params: { path: { batch_id: batchId } } })), [batchId]);
  const [showDeliveries, setShowDeliveries] = useState(false);
  const deliveries = useLoad(
    async () => (showDeliveries ? (await ok(api.GET('/api/v1/batches/{batch_id}/webhook-deliveries', { params: { path: { batch_id: batchId } } }))).data : []),
    [batchId, showDeliveries],
  );
  const b = batch.data;
  const running = !!b && RUNNING.includes(b.status);
  useInterval(() => batch.reload(), 1500, running);
  const act = useAction(async (action: 'cancel' | 'pause' | 'resume') => {
    if (action === 'cancel' && !confirm('Cancel this batch? Numbers not yet called will not be called.')) return;
    const params = { path: { batch_id: batchId } };
    if (action === 'cancel') await ok(api.POST('/api/v1/batches/{batch_id}/cancel', { params }));
    else if (action === 'pause') await ok(api.POST('/api/v1/batches/{batch_id}/pause', { params }));
    else await ok(api.POST('/api/v1/batches/{batch_id}/resume', { params }));
    batch.reload();
  });
  if (!b)
    return (
      <section>
        <ErrorNote error={batch.error} />
        <Loading when={batch.loading} />
      </section>
    );
  const done = b.completed_count + b.failed_count + b.voicemail_count;
  const writable = canWrite(session);
  return (
    <section>
      <p>
        <a href="#/batches">← Batches</a>
      </p>
      <h1>{b.name}</h1>
      <p>
        <Status value={b.status} /> <code class="muted">{b.batch_id}</code>
      </p>
      <label class="progress">
        <span>
          {done} of {b.total} numbers finished
        </span>
        <progress max={Math.max(b.total, 1)} value={done} aria-label="Batch progress" />
      </label>
      <dl class="facts">
        <dt>Completed</dt>
        <dd data-count="completed">{b.completed_count}</dd>
        <dt>Voicemail</dt>
        <dd data-count="voicemail">{b.voicemail_count}</dd>
        <dt>Failed</dt>
        <dd data-count="failed">{b.failed_count}</dd>
        <dt>Agent</dt>
        <dd>
          <a href={`#/agents/${b.agent_id}`}>
            <code>{b.agent_id}</code>
          </a>{' '}
          via {b.provider}
        </dd>
        <dt>Concurrency</dt>
        <dd>{b.concurrency}</dd>
        <dt>Scheduled</dt>
        <dd>
          <When iso={b.scheduled_at} />
        </dd>
        <dt>Finished</dt>
        <dd>
          <When iso={b.completed_at} />
        </dd>
      </dl>
      {writable && running && (
        <p class="actions">
          {b.status === 'paused' ? (
            <button type="button" disabled={act.busy} onClick={() => void act.run('resume')}>
              Resume
            </button>
          ) : (
            <button type="button" class="secondary" disabled={act.busy} onClick={() => void act.run('pause')}>
              Pause
            </button>
          )}
          <button type="button" class="danger" disabled={act.busy} onClick={() => void act.run('cancel')}>
            Cancel batch
          </button>
        </p>
      )}
      <ErrorNote error={act.error ?? batch.error} />
      <SkippedRows items={b.skipped.items} />
      <h2>Numbers</h2>
      <table>
        <thead>
          <tr>
            <th>Number</th>
            <th>Status</th>
            <th>Attempts</th>
            <th>Outcome</th>
            <th>Call</th>
          </tr>
        </thead>
        <tbody>
          {b.recipients.map((r) => (
            <tr key={r.recipient_id}>
              <td>{r.to_number}</td>
              <td>
                <Status value={r.status} />
              </td>
              <td>{r.attempts}</td>
              <td>
                {r.outcome ?? '—'}
                {r.last_error && <span class="muted"> ({r.last_error})</span>}
              </td>
              <td>
                {r.call_id ? (
                  <a href={`#/calls/${r.call_id}`}>
                    <code>{r.call_id}</code>
                  </a>
                ) : (
                  '—'
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Webhook deliveries</h2>
      {showDeliveries ? (
        <>
          <ErrorNote error={deliveries.error} />
          {deliveries.data && <DeliveryTable deliveries={deliveries.data} />}
        </>
      ) : (
        <button type="button" class="secondary" onClick={() => setShowDeliveries(true)}>
          Show deliveries
        </button>
      )}
    </section>
  );
}
