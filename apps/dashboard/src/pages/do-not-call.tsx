/**
 * The do-not-call list: numbers the workspace's people asked not to be called on. Add one, find one,
 * import a CSV (its per-row report shown), remove an entry; where each came from (the API, an import,
 * an opt-out during a call, linked to the call).
 */
import { useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, MoreButton, TableHead, When, formValue, useAction, usePaged } from '../ui.js';

type Entry = Schemas['DoNotCallEntry'];
type ImportResult = Schemas['DoNotCallImportResult'];

const SOURCES: Record<Entry['source'], string> = { api: 'added', csv: 'imported', opt_out: 'opted out during a call' };

function ImportReport({ result }: { result: ImportResult }) {
  return (
    <div class="notice" role="status">
      <p>
        {result.rows} rows read: {result.added} listed, {result.already_listed} already on the list, {result.skipped.count} skipped.
      </p>
      {result.skipped.items.length > 0 && (
        <ul>
          {result.skipped.items.map((s) => (
            <li key={s.row}>{s.message}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

export function DoNotCallPage({ session }: { session: SignedIn }) {
  const [search, setSearch] = useState<string | undefined>(undefined);
  const list = usePaged((starting_after) => ok(api.GET('/api/v1/do-not-call', { params: { query: { limit: 50, starting_after, number: search } } })), [search]);
  const [note, setNote] = useState<string | null>(null);
  const [report, setReport] = useState<ImportResult | null>(null);
  const add = useAction(async (form: HTMLFormElement) => {
    const entry = await ok(api.POST('/api/v1/do-not-call', { body: { number: formValue(form, 'number') } }));
    setNote(`${entry.number} is on the list.`);
    form.reset();
    list.reload();
  });
  const upload = useAction(async (form: HTMLFormElement) => {
    const file = (form.elements.namedItem('file') as HTMLInputElement).files?.[0];
    if (!file) throw new Error('Choose a CSV file.');
    const result = await ok(
      api.POST('/api/v1/do-not-call/csv', {
        // The contract types a binary part as a string; the serializer puts the chosen File in its place.
        body: { file: file.name },
        bodySerializer: () => {
          const data = new FormData();
          data.append('file', file, file.name);
          return data;
        },
      }),
    );
    setReport(result);
    form.reset();
    list.reload();
  });
  const find = useAction(async (form: HTMLFormElement) => setSearch(formValue(form, 'find') || undefined));
  const remove = useAction(async (entry: Entry) => {
    if (!confirm(`Take ${entry.number} off the list? Calls and batches will call it again.`)) return;
    await ok(api.DELETE('/api/v1/do-not-call/{entry_id}', { params: { path: { entry_id: entry.entry_id } } }));
    list.reload();
  });
  const writable = canWrite(session);
  return (
    <section>
      <h1>Do not call</h1>
      <p class="muted">Calls to these numbers are refused and batches skip them, on every agent of the workspace.</p>
      {writable && (
        <div class="row">
          <ActionForm action={add} label="Add a number" inline>
            <Field label="Number" hint="E.164, such as +14155550123.">
              <input name="number" required maxLength={32} />
            </Field>
            <button type="submit" disabled={add.busy}>
              Add to the list
            </button>
          </ActionForm>
          <ActionForm action={upload} label="Import numbers" inline>
            <Field label="CSV file" hint="A header row with a number column.">
              <input name="file" type="file" accept=".csv,text/csv" required />
            </Field>
            <button type="submit" disabled={upload.busy}>
              Import
            </button>
          </ActionForm>
        </div>
      )}
      <ErrorNote error={add.error ?? upload.error} />
      {note && (
        <p class="notice" role="status">
          {note}
        </p>
      )}
      {report && <ImportReport result={report} />}
      <ActionForm action={find} label="Find a number" inline>
        <Field label="Find">
          <input name="find" maxLength={32} placeholder="+14155550123" />
        </Field>
        <button type="submit" class="secondary">
          Find
        </button>
      </ActionForm>
      <ErrorNote error={list.error ?? remove.error} />
      <Loading when={list.loading && list.items.length === 0} />
      <table>
        <TableHead columns={['Number', 'How', 'Listed']} actions />
        <tbody>
          {list.items.map((e) => (
            <tr key={e.entry_id} data-entry-id={e.entry_id}>
              <td>
                <code>{e.number}</code>
              </td>
              <td>
                {SOURCES[e.source]}
                {e.call_id && (
                  <>
                    {' '}
                    (<a href={`#/calls/${e.call_id}`}>the call</a>)
                  </>
                )}
              </td>
              <td>
                <When iso={e.created_at} />
              </td>
              <td>
                {writable && (
                  <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run(e)} aria-label={`Remove ${e.number}`}>
                    Remove
                  </button>
                )}
              </td>
            </tr>
          ))}
          {!list.loading && list.items.length === 0 && (
            <tr>
              <td colSpan={4} class="muted">
                {search ? 'That number is not on the list.' : 'No numbers on the list.'}
              </td>
            </tr>
          )}
        </tbody>
      </table>
      <MoreButton list={list} />
    </section>
  );
}
