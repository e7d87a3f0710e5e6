/** The workspace's members and their roles; owners and admins add members. */
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { canAdminister, type SignedIn } from '../session.js';
import { ActionForm, ErrorNote, Field, Loading, When, formValue, useAction, useLoad } from '../ui.js';

const ROLES: Array<{ role: Schemas['MemberCreateRequest']['role']; says: string }> = [
  { role: 'viewer', says: 'reads everything, changes nothing' },
  { role: 'developer', says: 'builds agents, places calls and batches, manages webhooks and keys' },
  { role: 'admin', says: 'a developer who also adds members' },
];

export function MembersPage({ session }: { session: SignedIn }) {
  const members = useLoad(() => ok(api.GET('/api/v1/members')), []);
  const add = useAction(async (form: HTMLFormElement) => {
    await ok(
      api.POST('/api/v1/members', {
        body: {
          email: formValue(form, 'email'),
          password: new FormData(form).get('password') as string,
          role: formValue(form, 'role') as Schemas['MemberCreateRequest']['role'],
        },
      }),
    );
    form.reset();
    members.reload();
  });
  return (
    <section>
      <h1>Members</h1>
      <ErrorNote error={members.error} />
      <Loading when={members.loading && !members.data} />
      {members.data && (
        <table>
          <thead>
            <tr>
              <th>Email</th>
              <th>Role</th>
              <th>Joined</th>
            </tr>
          </thead>
          <tbody>
            {members.data.map((m) => (
              <tr key={m.id}>
                <td>
                  {m.email}
                  {m.id === session.user.id && <span class="muted"> (you)</span>}
                </td>
                <td>
                  <span class={`role role-${m.role}`}>{m.role}</span>
                </td>
                <td>
                  <When iso={m.created_at} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {canAdminister(session) && (
        <ActionForm action={add}>
          <h2>Add a member</h2>
          <div class="row">
            <Field label="Email">
              <input name="email" type="email" required maxLength={254} autoComplete="off" />
            </Field>
            <Field label="Initial password" hint="At least 8 characters; share it with them privately.">
              <input name="password" type="password" required minLength={8} maxLength={256} autoComplete="new-password" />
            </Field>
            <Field label="Role">
              <select name="role">
                {ROLES.map((r) => (
                  <option key={r.role} value={r.role} selected={r.role === 'developer'}>
                    {r.role}: {r.says}
                  </option>
                ))}
              </select>
            </Field>
          </div>
          <ErrorNote error={add.error} />
          <button type="submit" disabled={add.busy}>
            Add member
          </button>
        </ActionForm>
      )}
    </section>
  );
}
