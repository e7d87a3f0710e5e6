/** The agent tried live in the dashboard: the service's own web widget, its tokens minted with the dashboard session. */
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Schemas } from '../api-types.js';
import { api, ok } from '../api.js';
import { ErrorNote } from '../ui.js';

type TokenRequest = Schemas['RealtimeSessionCreateRequest'];
type Widget = HTMLElement & { getToken: ((req: TokenRequest) => Promise<{ ws_url: string }>) | null };

const WIDGET_URL = '/sdk/voice-agent-widget.js';
let loading: Promise<void> | null = null;

/** Loads the widget's module once (a script element: the page's CSP allows scripts of this service only). */
function loadWidget(): Promise<void> {
  loading ??= new Promise<void>((resolve, reject) => {
    const script = document.createElement('script');
    script.type = 'module';
    script.src = WIDGET_URL;
    script.onload = () => void customElements.whenDefined('voice-agent-widget').then(() => resolve());
    script.onerror = () => {
      loading = null;
      reject(new Error('The widget could not be loaded.'));
    };
    document.head.append(script);
  });
  return loading;
}

export function TryAgent({ agentId }: { agentId: string }) {
  const host = useRef<HTMLDivElement>(null);
  const [shown, setShown] = useState(false);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!shown) return;
    let widget: Widget | null = null;
    loadWidget().then(() => {
      if (!host.current) return;
      widget = document.createElement('voice-agent-widget') as Widget;
      widget.setAttribute('agent-id', agentId);
      widget.getToken = (req) => ok(api.POST('/api/v1/realtime/sessions', { body: { agent_id: req.agent_id, user_id: req.user_id, source: req.source } }));
      host.current.replaceChildren(widget);
    }, setError);
    return () => widget?.remove();
  }, [shown, agentId]);
  if (!shown) {
    return (
      <p>
        <button type="button" class="secondary" onClick={() => setShown(true)}>
          Talk to this agent
        </button>{' '}
        <span class="muted">Opens the web widget, as your site would show it.</span>
      </p>
    );
  }
  return (
    <div class="try">
      <ErrorNote error={error} />
      <div ref={host} />
    </div>
  );
}
