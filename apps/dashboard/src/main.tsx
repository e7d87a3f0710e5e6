/** The dashboard: signed out it shows login and sign-up; signed in, the workspace's views by the URL's fragment. */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './styles.css';
import { api } from './api.js';
import { navigate, useRoute } from './router.js';
import { canAdminister, currentSession, onSessionChange, signOut, type SignedIn } from './session.js';
import { AgentPage } from './pages/agent.js';
import { AgentsPage } from './pages/agents.js';
import { AuthPage } from './pages/auth.js';
import { BatchesPage, BatchPage } from './pages/batches.js';
import { CallPage, CallsPage } from './pages/calls.js';
import { DoNotCallPage } from './pages/do-not-call.js';
import { KeysPage } from './pages/keys.js';
import { MembersPage } from './pages/members.js';
import { SipTrunksPage } from './pages/sip-trunks.js';
import { UsagePage } from './pages/usage.js';
import { WebhooksPage } from './pages/webhooks.js';

const VIEWS = [
  { view: 'agents', label: 'Agents' },
  { view: 'calls', label: 'Calls' },
  { view: 'batches', label: 'Batches' },
  { view: 'usage', label: 'Usage' },
  { view: 'do-not-call', label: 'Do not call' },
  { view: 'sip-trunks', label: 'SIP trunks' },
  { view: 'webhooks', label: 'Webhooks' },
  { view: 'keys', label: 'API keys' },
  { view: 'members', label: 'Members' },
];

function useSession(): SignedIn | null {
  const [session, setSession] = useState(currentSession);
  useEffect(() => onSessionChange(() => setSession(currentSession())), []);
  return session;
}

function View({ session, view, id }: { session: SignedIn; view: string; id: string | null }) {
  switch (view) {
    case 'agents':
      return id ? <AgentPage session={session} agentId={id} /> : <AgentsPage session={session} />;
    case 'calls':
      return id ? <CallPage session={session} callId={id} /> : <CallsPage session={session} />;
    case 'batches':
      return id ? <BatchPage session={session} batchId={id} /> : <BatchesPage session={session} />;
    case 'usage':
      return <UsagePage />;
    case 'do-not-call':
      return <DoNotCallPage session={session} />;
    case 'sip-trunks':
      return <SipTrunksPage session={session} />;
    case 'webhooks':
      return <WebhooksPage session={session} />;
    case 'keys':
      return <KeysPage session={session} />;
    case 'members':
      return <MembersPage session={session} />;
    default:
      return (
        <section>
          <h1>Not found</h1>
          <p>
            <a href="#/agents">Go to agents</a>
          </p>
        </section>
      );
  }
}

function App() {
  const session = useSession();
  const route = useRoute();
  const [ended, setEnded] = useState(false);
  useEffect(() => {
    if (session && (route.view === '' || route.view === 'login' || route.view === 'signup')) navigate('agents');
  }, [session, route.view]);
  useEffect(() => onSessionChange(() => setEnded(!currentSession())), []);

  if (!session) {
    const notice = ended ? 'Your session has ended. Log in again.' : undefined;
    return <AuthPage key={route.view} mode={route.view === 'signup' ? 'signup' : 'login'} notice={notice} />;
  }
  const logout = async () => {
    await api.POST('/api/v1/auth/logout').catch(() => undefined);
    signOut();
    navigate('login');
  };
  return (
    <>
      <header class="top">
        <strong class="brand">Voice Agents</strong>
        <nav aria-label="Dashboard">
          {VIEWS.filter((v) => v.view !== 'keys' || canAdminister(session) || session.user.role === 'developer').map((v) => (
            <a key={v.view} href={`#/${v.view}`} aria-current={route.view === v.view ? 'page' : undefined}>
              {v.label}
            </a>
          ))}
        </nav>
        <span class="who" title={`${session.user.email} in ${session.workspace.name}`}>
          {session.workspace.name} · {session.user.email}
        </span>
        <span class={`role role-${session.user.role}`}>{session.user.role}</span>
        <button type="button" class="secondary" onClick={() => void logout()}>
          Log out
        </button>
      </header>
      <main class="content">
        <View session={session} view={route.view} id={route.id} />
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
