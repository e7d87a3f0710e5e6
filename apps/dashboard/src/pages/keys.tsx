/** API keys: create one (its full key shown this once), see when each was last used, revoke. */
import { useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, TableHead, When, formValue, useAction, useLoad } from '../ui.js';

export function KeysPage({ session }: { session: SignedIn }) {
  const keys = useLoad(() => ok(api.GET('/api/v1/keys')), []);
  const [created, setCreated] = useState<Schemas['ApiKeyCreated'] | null>(null);
  const create = useAction(async (form: HTMLFormElement) => {
    setCreated(await ok(api.POST('/api/v1/keys', { body: { name: formValue(form, 'name') } })));
    form.reset();
    keys.reload();
  });
  const revoke = useAction(async (key: Schemas['ApiKey']) => {
    if (!confirm(`Revoke the key "${key.name}"? Programs using it stop working at once.`)) return;
    await ok(api.DELETE('/api/v1/keys/{key_id}', { params: { path: { key_id: key.id } } }));
    keys.reload();
  });
  const writable = canWrite(session);
  return (
    <section>
      <h1>API keys</h1>
      <p class="muted">A key lets your programs call the developer API for this workspace.</p>
      {writable && (
        <ActionForm action={create} inline>
          <Field label="Key name">
            <input name="name" required maxLength={100} placeholder="Production server" />
          </Field>
          <button type="submit" disabled={create.busy}>
            Create key
          </button>
        </ActionForm>
      )}
      <ErrorNote error={create.error} />
      {created && (
        <div class="reveal" role="status">
          <p>
            <strong>Copy your new key now.</strong> It is shown only this once.
          </p>
          <input class="secret" readOnly value={created.key} aria-label="New API key" onFocus={(e) => e.currentTarget.select()} />
          <button type="button" class="secondary" onClick={() => void navigator.clipboard?.writeText(created.key)}>
            Copy
          </button>
          <button type="button" class="secondary" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      <ErrorNote error={keys.error ?? revoke.error} />
      <Loading when={keys.loading && !keys.data} />
      {keys.data && (
        <table>
          <TableHead columns={['Name', 'Key', 'Created', 'Last used', 'State']} actions />
          <tbody>
            {keys.data.map((k) => (
              <tr key={k.id} data-key-id={k.id}>
                <td>{k.name}</td>
                <td>
                  <code>{k.key_prefix}…</code>
                </td>
                <td>
                  <When iso={k.created_at} />
                </td>
                <td>
                  <When iso={k.last_used_at} />
                </td>
                <td>{k.revoked ? <span class="status status-revoked">revoked</span> : <span class="status status-active">active</span>}</td>
                <td>
                  {writable && !k.revoked && (
                    <button type="button" class="danger" disabled={revoke.busy} onClick={() => void revoke.run(k)} aria-label={`Revoke ${k.name}`}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            ))}
            {keys.data.length === 0 && (
              <tr>
                <td colSpan={6} class="muted">
                  No keys yet.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </section>
  );
}
