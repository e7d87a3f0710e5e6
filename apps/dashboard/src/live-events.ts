/**
 * Follows a conversation's live events (`GET .../events`, Server-Sent Events) with the dashboard
 * session. The browser's EventSource cannot send an Authorization header, so the stream is read with
 * fetch and parsed by eventsource-parser. A stream that drops is resumed after a pause from the last
 * event received (`Last-Event-ID`: nothing is missed or repeated); it stops after the `end` event, on
 * an answer that retrying cannot change (404, 401), or when the caller stops it.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { createParser } from 'eventsource-parser';
import type { LiveEvent } from './api-types.js';
import { currentSession } from './session.js';

export type FollowState = 'connecting' | 'live' | 'reconnecting' | 'ended' | 'failed';

export function followEvents(path: string, onEvent: (e: LiveEvent) => void, onState: (s: FollowState) => void): () => void {
  const abort = new AbortController();
  let lastId: string | null = null;
  let ended = false;
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const run = async () => {
    for (let failures = 0; !abort.signal.aborted;) {
      onState(lastId === null && failures === 0 ? 'connecting' : 'reconnecting');
      try {
        const session = currentSession();
        const res = await fetch(path, {
          headers: {
            Accept: 'text/event-stream',
            ...(session ? { Authorization: `Bearer ${session.token}` } : {}),
            ...(lastId ? { 'Last-Event-ID': lastId } : {}),
          },
          cache: 'no-store',
          signal: abort.signal,
        });
        if (!res.ok || !res.body) {
          // A stream that cannot be had (gone, not ours, signed out): retrying does not help. Too many
          // streams (429) or an instance going away (5xx) may pass.
          if (res.status !== 429 && res.status < 500) return onState('failed');
          throw new Error(`HTTP ${res.status}`);
        }
        onState('live');
        failures = 0;
        const parser = createParser({
          onEvent(message) {
            if (message.id) lastId = message.id;
            const event = JSON.parse(message.data) as LiveEvent;
            if (event.type === 'end') ended = true;
            onEvent(event);
          },
        });
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          parser.feed(value);
        }
        if (ended) return onState('ended');
      } catch {
        if (abort.signal.aborted) return;
      }
      failures += 1;
      await pause(Math.min(10_000, 500 * 2 ** Math.min(failures, 5)));
    }
  };
  void run();
  return () => abort.abort();
}

/** One line of a live conversation as the page shows it: a finished utterance or keys, or a note (tool, interruption, transfer). */
export type LiveLine = { kind: 'turn'; role: 'model' | 'user'; text: string; dtmf?: string } | { kind: 'note'; text: string };

export interface LiveFeed {
  state: FollowState | 'off';
  lines: LiveLine[];
  /** What each side is saying right now (the utterance so far), until it is finished. */
  partial: { model?: string; user?: string };
  /** The conversation's live status (`LiveCallStatus`), from its latest status event. */
  status: string | null;
}

const OFF: LiveFeed = { state: 'off', lines: [], partial: {}, status: null };

/** A live event applied to what the page shows. */
export function applyLiveEvent(feed: LiveFeed, e: LiveEvent): LiveFeed {
  switch (e.type) {
    case 'status':
      return { ...feed, status: e.status };
    case 'transcript': {
      const partial = { ...feed.partial };
      if (!e.final) return { ...feed, partial: { ...partial, [e.role]: e.text } };
      delete partial[e.role];
      const line: LiveLine = e.dtmf === undefined ? { kind: 'turn', role: e.role, text: e.text } : { kind: 'turn', role: e.role, text: e.text, dtmf: e.dtmf };
      return { ...feed, partial, lines: [...feed.lines, line] };
    }
    case 'tool_call':
      return { ...feed, lines: [...feed.lines, { kind: 'note', text: `Calling ${e.name}…` }] };
    case 'tool_result':
      return { ...feed, lines: [...feed.lines, { kind: 'note', text: `${e.name} ${e.ok ? 'answered' : 'failed'}` }] };
    case 'interrupted':
      return { ...feed, partial: { ...feed.partial, model: undefined }, lines: [...feed.lines, { kind: 'note', text: 'The caller spoke over the agent' }] };
    case 'transfer':
      return { ...feed, lines: [...feed.lines, { kind: 'note', text: `Transfer to ${e.to}: ${e.status.replace(/_/g, ' ')}` }] };
    case 'dtmf':
      return feed;
    case 'idle':
      return {
        ...feed,
        lines: [...feed.lines, { kind: 'note', text: e.action === 'reminder' ? `Nobody spoke: reminder ${e.count}` : 'Nobody spoke: the agent hangs up' }],
      };
    case 'end':
      return { ...feed, status: 'ended', partial: {} };
  }
}

/**
 * The live feed of a conversation while `active`: every event from the first (the stream replays
 * what happened before the page opened), applied in order. `onChange` runs on status moves and the
 * end, for the page to reload the record.
 */
export function useLiveFeed(path: string, active: boolean, onChange: () => void): LiveFeed {
  const [feed, setFeed] = useState<LiveFeed>(OFF);
  const changed = useRef(onChange);
  changed.current = onChange;
  useEffect(() => {
    if (!active) return;
    setFeed(OFF);
    return followEvents(
      path,
      (e) => {
        setFeed((f) => applyLiveEvent(f, e));
        if (e.type === 'status' || e.type === 'end') changed.current();
      },
      (state) => setFeed((f) => ({ ...f, state })),
    );
  }, [path, active]);
  return active ? feed : OFF;
}
