/** Webhooks: register a URL for call and batch events (and the live ones: status changes, transcripts), the workspace's signing secret, each webhook's delivery log. */
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { webhookEvents } from '../../../../generated/asyncapi-types.js';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { canWrite, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, MoreButton, TableHead, When, formValue, useAction, useLoad, usePaged } from '../ui.js';
import { DeliveryTable } from './deliveries.js';

type EventType = Schemas['WebhookEventType'];
/** The kinds of the contract (its AsyncAPI webhook messages); a webhook registered without a choice gets those not opt-in. */
const EVENTS = Object.keys(webhookEvents) as EventType[];
const DEFAULT_EVENTS = EVENTS.filter((e) => !webhookEvents[e].optIn);

function SigningSecret() {
  const [secret, setSecret] = useState<string | null>(null);
  const [note, setNote] = useState<string | null>(null);
  const reveal = useAction(async () => setSecret((await ok(api.GET('/api/v1/webhooks/secret'))).webhook_secret));
  const rotate = useAction(async () => {
    if (!confirm('Rotate the signing secret? Deliveries carry signatures of both secrets for 24 hours.')) return;
    const r = await ok(api.POST('/api/v1/webhooks/secret/rotate'));
    setSecret(r.webhook_secret);
    setNote(`The previous secret is used alongside until ${new Date(r.previous_secret_expires_at).toLocaleString()}.`);
  });
  return (
    <div>
      <h2>Signing secret</h2>
      <p class="muted">
        Every delivery is signed with it (headers <code>webhook-signature</code> and <code>X-Webhook-Signature</code>).
      </p>
      {secret ? (
        <input class="secret" readOnly value={secret} aria-label="Webhook signing secret" onFocus={(e) => e.currentTarget.select()} />
      ) : (
        <button type="button" class="secondary" disabled={reveal.busy} onClick={() => void reveal.run()}>
          Show secret
        </button>
      )}{' '}
      <button type="button" class="secondary" disabled={rotate.busy} onClick={() => void rotate.run()}>
        Rotate
      </button>
      {note && (
        <p class="notice" role="status">
          {note}
        </p>
      )}
      <ErrorNote error={reveal.error ?? rotate.error} />
    </div>
  );
}

function Deliveries({ webhookId }: { webhookId: string }) {
  const list = usePaged(
    (starting_after) =>
      ok(api.GET('/api/v1/webhooks/{webhook_id}/deliveries', { params: { path: { webhook_id: webhookId }, query: { limit: 50, starting_after } } })),
    [webhookId],
  );
  return (
    <div class="deliveries">
      <ErrorNote error={list.error} />
      <Loading when={list.loading && list.items.length === 0} />
      {!list.loading || list.items.length ? <DeliveryTable deliveries={list.items} /> : null}
      <MoreButton list={list} />
    </div>
  );
}

export function WebhooksPage({ session }: { session: SignedIn }) {
  const hooks = useLoad(async () => (await ok(api.GET('/api/v1/webhooks', { params: { query: { limit: 100 } } }))).data, []);
  const [open, setOpen] = useState<string | null>(null);
  const add = useAction(async (form: HTMLFormElement) => {
    const data = new FormData(form);
    const events = EVENTS.filter((e) => data.has(`event:${e}`));
    if (events.length === 0) throw new Error('Choose at least one event.');
    await ok(api.POST('/api/v1/webhooks', { body: { url: formValue(form, 'url'), events } }));
    form.reset();
    hooks.reload();
  });
  const remove = useAction(async (hook: Schemas['Webhook']) => {
    if (!confirm(`Stop sending events to ${hook.url}?`)) return;
    await ok(api.DELETE('/api/v1/webhooks/{webhook_id}', { params: { path: { webhook_id: hook.webhook_id } } }));
    hooks.reload();
  });
  const writable = canWrite(session);
  return (
    <section>
      <h1>Webhooks</h1>
      {writable && (
        <ActionForm action={add}>
          <div class="row">
            <Field label="Endpoint URL" hint="Public http(s) URL; private and loopback addresses are refused.">
              <input name="url" type="url" required maxLength={2048} placeholder="https://example.com/hooks/voice" />
            </Field>
            <fieldset class="events">
              <legend>Events</legend>
              {EVENTS.map((e) => (
                <label key={e} class="check">
                  <input type="checkbox" name={`event:${e}`} defaultChecked={DEFAULT_EVENTS.includes(e)} /> {e}
                </label>
              ))}
            </fieldset>
          </div>
          <ErrorNote error={add.error} />
          <button type="submit" disabled={add.busy}>
            Register webhook
          </button>
        </ActionForm>
      )}
      <ErrorNote error={hooks.error ?? remove.error} />
      <Loading when={hooks.loading && !hooks.data} />
      {hooks.data && (
        <table>
          <TableHead columns={['URL', 'Events', 'Registered']} actions />
          <tbody>
            {hooks.data.map((h) => (
              <Fragment key={h.webhook_id}>
                <tr>
                  <td class="url">{h.url}</td>
                  <td>{h.events.join(', ')}</td>
                  <td>
                    <When iso={h.created_at} />
                  </td>
                  <td>
                    <button
                      type="button"
                      class="secondary"
                      aria-expanded={open === h.webhook_id}
                      onClick={() => setOpen(open === h.webhook_id ? null : h.webhook_id)}
                    >
                      Deliveries
                    </button>
                    {writable && (
                      <button type="button" class="danger" disabled={remove.busy} onClick={() => void remove.run(h)}>
                        Delete
                      </button>
                    )}
                  </td>
                </tr>
                {open === h.webhook_id && (
                  <tr>
                    <td colSpan={4}>
                      <Deliveries webhookId={h.webhook_id} />
                    </td>
                  </tr>
                )}
              </Fragment>
            ))}
            {hooks.data.length === 0 && (
              <tr>
                <td colSpan={4} class="muted">
                  No webhooks yet.
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
      {writable && <SigningSecret />}
    </section>
  );
}
