/** Pieces every page uses: loading with errors, lists paged by cursor, actions with a busy state, form fields. */
import { cloneElement, type ComponentChildren, type VNode } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { ApiError } from './api.js';

export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  const e = error instanceof ApiError ? error : null;
  return (
    <div class="error" role="alert">
      <strong>{e ? e.message : String(error)}</strong>
      {e && e.items.length > 1 && (
        <ul>
          {e.items.slice(0, 50).map((it, i) => (
            <li key={i}>
              {(it.loc ?? []).slice(1).join(' › ')}: {it.msg}
            </li>
          ))}
        </ul>
      )}
      {e && e.code && (
        <small>
          {' '}
          <code>{e.code}</code>
          {e.param && (
            <>
              {' '}
              on <code>{e.param}</code>
            </>
          )}
          {e.requestId && <> · request {e.requestId}</>}
        </small>
      )}
    </div>
  );
}

export interface Loaded<T> {
  data?: T;
  error: unknown;
  loading: boolean;
  reload(): void;
}

/** Runs `load` on mount and when `deps` change; `reload()` runs it again. A stale answer is dropped. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error: unknown; loading: boolean }>({ error: null, loading: true });
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setState((s) => ({ ...s, loading: true }));
    load().then(
      (data) => live && setState({ data, error: null, loading: false }),
      (error: unknown) => live && setState((s) => ({ data: s.data, error, loading: false })),
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  return { ...state, reload: useCallback(() => setTick((t) => t + 1), []) };
}

/** Calls `fn` every `ms` while `active`. */
export function useInterval(fn: () => void, ms: number, active: boolean): void {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active) return;
    const id = setInterval(() => saved.current(), ms);
    return () => clearInterval(id);
  }, [ms, active]);
}

interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

/** A cursor-paged list: the first page on mount, `more()` appends the next. */
export function usePaged<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>, deps: unknown[]) {
  const [items, setItems] = useState<T[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const load = useCallback(async (after: string | undefined, append: boolean) => {
    setLoading(true);
    try {
      const page = await fetchPage(after);
      setItems((prev) => (append ? [...prev, ...page.data] : page.data));
      setCursor(page.has_more ? page.next_cursor : null);
      setError(null);
    } catch (err) {
      setError(err);
    } finally {
      setLoading(false);
    }
  }, deps);
  useEffect(() => void load(undefined, false), [load]);
  return {
    items,
    error,
    loading,
    hasMore: cursor !== null,
    more: () => cursor && load(cursor, true),
    reload: () => load(undefined, false),
  };
}

/** An action behind a button: busy while it runs, its error kept to show. */
export function useAction<A extends unknown[]>(fn: (...args: A) => Promise<unknown>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async (...args: A): Promise<boolean> => {
    setBusy(true);
    setError(null);
    try {
      await fn(...args);
      return true;
    } catch (err) {
      setError(err);
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, clearError: () => setError(null) };
}

/**
 * A labelled control (label and control tied by id, so the label alone names it, not a select's
 * current option); the hint describes the control without being part of its name.
 */
export function Field({ label, hint, children }: { label: string; hint?: string; children: VNode<{ id?: string }> }) {
  const id = useId();
  return (
    <div class="field">
      <label for={id} class="label">
        {label}
      </label>
      {cloneElement(children, { id, 'aria-describedby': hint ? `${id}-hint` : undefined } as { id: string })}
      {hint && (
        <small class="hint" id={`${id}-hint`}>
          {hint}
        </small>
      )}
    </div>
  );
}

export function When({ iso }: { iso: string | null | undefined }) {
  if (!iso) return <span class="muted">—</span>;
  const d = new Date(iso);
  return <time dateTime={iso}>{d.toLocaleString()}</time>;
}

export function Status({ value }: { value: string }) {
  return <span class={`status status-${value}`}>{value.replace(/_/g, ' ')}</span>;
}

export function Loading({ when }: { when: boolean }) {
  return when ? (
    <p class="muted" aria-live="polite">
      Loading…
    </p>
  ) : null;
}

export function MoreButton({ list }: { list: { hasMore: boolean; loading: boolean; more(): unknown } }) {
  if (!list.hasMore) return null;
  return (
    <button type="button" class="secondary" disabled={list.loading} onClick={() => list.more()}>
      Load more
    </button>
  );
}

/** A form whose submission runs an action with the form (the page does not reload). */
export function ActionForm({
  action,
  label,
  inline,
  children,
}: {
  action: { run(form: HTMLFormElement): Promise<boolean> };
  label?: string;
  inline?: boolean;
  children: ComponentChildren;
}) {
  return (
    <form
      class={inline ? 'inline' : undefined}
      aria-label={label}
      onSubmit={(e) => {
        e.preventDefault();
        void action.run(e.currentTarget);
      }}
    >
      {children}
    </form>
  );
}

/** The value of a form's field by name (forms here are uncontrolled: read on submit). */
export const formValue = (form: HTMLFormElement, name: string): string => {
  const v = new FormData(form).get(name);
  return typeof v === 'string' ? v.trim() : '';
};

/** A table's head: its column titles, and a last column of row actions named for screen readers only. */
export function TableHead({ columns, actions }: { columns: string[]; actions?: boolean }) {
  return (
    <thead>
      <tr>
        {columns.map((c) => (
          <th key={c}>{c}</th>
        ))}
        {actions && (
          <th>
            <span class="sr-only">Actions</span>
          </th>
        )}
      </tr>
    </thead>
  );
}
