/** Sign-up (a new workspace and its owner) and login; both answer a dashboard session. */
import { api, ok } from '../api.js';
import { navigate } from '../router.js';
import { signIn } from '../session.js';
import { ActionForm, ErrorNote, Field, formValue, useAction } from '../ui.js';

export function AuthPage({ mode, notice }: { mode: 'login' | 'signup'; notice?: string }) {
  const submit = useAction(async (form: HTMLFormElement) => {
    const email = formValue(form, 'email');
    const password = new FormData(form).get('password') as string;
    const session =
      mode === 'signup'
        ? await ok(api.POST('/api/v1/auth/signup', { body: { email, password, workspace_name: formValue(form, 'workspace_name') } }))
        : await ok(api.POST('/api/v1/auth/login', { body: { email, password } }));
    signIn(session);
    navigate('agents');
  });
  return (
    <main class="auth">
      <h1>{mode === 'signup' ? 'Create your workspace' : 'Log in'}</h1>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ActionForm action={submit}>
        {mode === 'signup' && (
          <Field label="Workspace name">
            <input name="workspace_name" required maxLength={120} autoComplete="organization" />
          </Field>
        )}
        <Field label="Email">
          <input name="email" type="email" required maxLength={254} autoComplete="email" />
        </Field>
        <Field label="Password" hint={mode === 'signup' ? 'At least 8 characters.' : undefined}>
          <input
            name="password"
            type="password"
            required
            minLength={mode === 'signup' ? 8 : 1}
            maxLength={256}
            autoComplete={mode === 'signup' ? 'new-password' : 'current-password'}
          />
        </Field>
        <ErrorNote error={submit.error} />
        <button type="submit" disabled={submit.busy}>
          {mode === 'signup' ? 'Sign up' : 'Log in'}
        </button>
      </ActionForm>
      <p>
        {mode === 'signup' ? (
          <>
            Have an account? <a href="#/login">Log in</a>
          </>
        ) : (
          <>
            New here? <a href="#/signup">Create a workspace</a>
          </>
        )}
      </p>
    </main>
  );
}
