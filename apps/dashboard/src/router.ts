/** Views live in the URL's fragment (`/dashboard#/agents/agt_...`), so the service serves one page for all of them. */
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** The first segment: `agents`, `calls`, ... (`login` when empty and signed out). */
  view: string;
  /** The second segment, when the view shows one resource (`#/agents/agt_...`). */
  id: string | null;
}

export function parseRoute(hash: string): Route {
  const [view = '', id = null] = hash.replace(/^#\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  return { view, id };
}

export function navigate(view: string, id?: string): void {
  location.hash = id ? `#/${view}/${encodeURIComponent(id)}` : `#/${view}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', update);
    return () => removeEventListener('hashchange', update);
  }, []);
  return route;
}
