/**
 * `<voice-agent-widget agent-id="agt_..." token-url="/voice-token">`: a conversation with an agent in an
 * open shadow root, built on the client library. Before anyone starts, it reads the agent's public
 * profile (name, realtime settings) from the service it was loaded from, and offers camera and
 * screen-share controls only when the agent permits them.
 */
import { createSession, type Session, type SessionOptions, type SessionState, type Source, type Transcript } from '@voice-agent/client';
import { describeError } from './messages.js';
import { STYLES } from './styles.js';

/** `GET /api/v1/public/agents/{agent_id}`. */
export interface PublicAgentProfile {
  agent_id: string;
  name: string;
  realtime: { enable_webcam: boolean; enable_screen_share: boolean };
}

export type ProfileStatus = 'loading' | 'ready' | 'not_found' | 'failed';
type Media = 'camera' | 'screen';

/** Where this module was served from: `https://voice.example.com/sdk/voice-agent-widget.js` -> `https://voice.example.com/`. */
const SERVICE_BASE = new URL('..', import.meta.url).href;
const USER_ID_KEY = 'voice-agent-widget.user-id';

const icon = (path: string) => `<svg viewBox="0 0 24 24" aria-hidden="true" focusable="false"><path d="${path}"/></svg>`;
const MIC = icon('M12 14a3 3 0 0 0 3-3V5a3 3 0 0 0-6 0v6a3 3 0 0 0 3 3zm5-3a5 5 0 0 1-10 0H5a7 7 0 0 0 6 6.9V21h2v-3.1a7 7 0 0 0 6-6.9h-2z');
const CAMERA = icon('M17 10.5V7a1 1 0 0 0-1-1H4a1 1 0 0 0-1 1v10a1 1 0 0 0 1 1h12a1 1 0 0 0 1-1v-3.5l4 4v-11l-4 4z');
const SCREEN = icon('M20 18a2 2 0 0 0 2-2V6a2 2 0 0 0-2-2H4a2 2 0 0 0-2 2v10a2 2 0 0 0 2 2H0v2h24v-2h-4zM4 6h16v10H4V6z');

const TEMPLATE = `<style>${STYLES}</style>
<section class="panel" id="panel" part="panel" aria-labelledby="name" data-state="idle">
  <header part="header"><span class="dot" aria-hidden="true"></span><strong class="name" id="name" part="name">Voice agent</strong></header>
  <div class="log" id="log" part="log" role="log" aria-live="polite" aria-label="Conversation"></div>
  <p class="caption" id="caption" part="caption" aria-hidden="true"></p>
  <p class="status" id="status" part="status" role="status" aria-live="polite"></p>
  <form id="form" part="form">
    <input id="text" part="input" type="text" autocomplete="off" maxlength="4000" aria-label="Message to the agent" placeholder="Type a message" disabled>
    <button id="send" part="button send" type="submit" disabled>Send</button>
  </form>
  <div class="controls" id="controls" part="controls" role="group" aria-label="Conversation controls">
    <button class="start" id="start" part="button start" type="button" disabled>Start conversation</button>
    <button id="mute" part="button mute" type="button" aria-pressed="false" disabled>${MIC}Mute</button>
  </div>
</section>`;

function randomUserId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `visitor-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

/** A random id kept in localStorage, so one browser is one user across visits (in memory when storage is refused). */
function storedUserId(): string {
  try {
    const known = localStorage.getItem(USER_ID_KEY);
    if (known) return known;
    const id = randomUserId();
    localStorage.setItem(USER_ID_KEY, id);
    return id;
  } catch {
    return (memoryUserId ??= randomUserId());
  }
}
let memoryUserId: string | undefined;

export class VoiceAgentWidget extends HTMLElement {
  static readonly observedAttributes = ['agent-id', 'api-base', 'source'];

  /** Instead of `token-url`: returns `{ws_url}` however the page obtains it, given `{agent_id, user_id, source}`. */
  getToken: SessionOptions['getToken'] | null = null;

  private readonly root: ShadowRoot;
  private readonly el: {
    panel: HTMLElement;
    name: HTMLElement;
    log: HTMLElement;
    caption: HTMLElement;
    status: HTMLElement;
    form: HTMLFormElement;
    text: HTMLInputElement;
    send: HTMLButtonElement;
    controls: HTMLElement;
    start: HTMLButtonElement;
    mute: HTMLButtonElement;
  };
  private media: { camera: HTMLButtonElement | null; screen: HTMLButtonElement | null } = { camera: null, screen: null };
  private _profile: PublicAgentProfile | null = null;
  private _profileStatus: ProfileStatus = 'loading';
  private profileLoad: AbortController | null = null;
  private _session: Session | null = null;
  private sessionSource: Source = 'voice';
  private selectedMedia: Media | null = null;
  private muted = false;
  private lastTyped: string | null = null;
  /** What the live region said last about the current session: its close is announced only after it was live and ended quietly. */
  private sessionNews: 'none' | 'live' | 'error' | 'ended_by_agent' = 'none';

  constructor() {
    super();
    this.root = this.attachShadow({ mode: 'open' });
    this.root.innerHTML = TEMPLATE;
    const $ = <T extends HTMLElement>(id: string) => this.root.getElementById(id) as T;
    this.el = {
      panel: $('panel'),
      name: $('name'),
      log: $('log'),
      caption: $('caption'),
      status: $('status'),
      form: $('form'),
      text: $('text'),
      send: $('send'),
      controls: $('controls'),
      start: $('start'),
      mute: $('mute'),
    };
    this.el.start.addEventListener('click', () => {
      if (this.active) void this.stop();
      else void this.start();
    });
    this.el.mute.addEventListener('click', () => this.setMuted(!this.muted));
    this.el.form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      this.sendText(this.el.text.value);
    });
  }

  connectedCallback(): void {
    if (!this._profile && !this.profileLoad) void this.loadProfile();
    this.render();
  }

  disconnectedCallback(): void {
    this.profileLoad?.abort();
    this.profileLoad = null;
    // A widget taken off the page ends its conversation, so the workspace's slot is freed.
    void this._session?.stop();
  }

  attributeChangedCallback(name: string, oldValue: string | null, value: string | null): void {
    if (oldValue === value || !this.isConnected) return;
    if (name === 'source') this.render();
    else void this.loadProfile();
  }

  /** The agent's public profile once loaded. */
  get profile(): PublicAgentProfile | null {
    return this._profile;
  }

  get profileStatus(): ProfileStatus {
    return this._profileStatus;
  }

  /** The client library's session of the current (or last) conversation. */
  get session(): Session | null {
    return this._session;
  }

  get state(): SessionState {
    return this._session?.state ?? 'idle';
  }

  /** The service's base URL: the `api-base` attribute, else where this module was loaded from. */
  get apiBase(): string {
    const attr = this.getAttribute('api-base');
    if (!attr) return SERVICE_BASE;
    const url = new URL(attr, document.baseURI);
    if (!url.pathname.endsWith('/')) url.pathname += '/';
    return url.href;
  }

  get userId(): string {
    return this.getAttribute('user-id') || storedUserId();
  }

  private get active(): boolean {
    const s = this._session?.state;
    return s === 'starting' || s === 'live' || s === 'ended';
  }

  /** The session's source: a pressed camera or screen control, else the `source` attribute (`voice` or `text`). */
  private nextSource(): Source {
    if (this.selectedMedia) return this.selectedMedia;
    return this.getAttribute('source') === 'text' ? 'text' : 'voice';
  }

  /**
   * Starts a conversation; call it from a click or key press (browsers allow audio and screen sharing
   * only after a user gesture). Resolves when it is live or has failed (the reason is announced and
   * dispatched as `voice-agent-error`).
   */
  async start(): Promise<void> {
    if (this.active) return;
    const agentId = this.getAttribute('agent-id');
    const tokenUrl = this.getAttribute('token-url');
    if (!agentId || (!tokenUrl && !this.getToken)) {
      this.announce('The widget needs agent-id and token-url attributes.', true);
      return;
    }
    const source = this.nextSource();
    const session = createSession({
      ...(this.getToken ? { getToken: this.getToken } : { tokenUrl: tokenUrl! }),
      agentId,
      userId: this.userId,
      source,
    });
    session.setMuted(this.muted);
    this._session = session;
    this.sessionSource = source;
    this.lastTyped = null;
    this.sessionNews = 'none';
    this.el.caption.textContent = '';
    session.on('state', (state) => this.onState(session, state));
    session.on('transcript', (t) => this.onTranscript(session, t));
    session.on('reply', (text) => session === this._session && this.addEntry('model', text));
    session.on('error', (err) => session === this._session && this.fail(err.code, err.message));
    const started = session.start();
    this.announce('Connecting…');
    this.render();
    try {
      await started;
      if (session !== this._session || session.state !== 'live') return;
      this.sessionNews = 'live';
      this.announce(source === 'text' ? 'Connected. Type a message to the agent.' : 'Connected. You can talk now.');
      if (source === 'text') this.el.text.focus();
    } catch (err) {
      const e = err as { code?: string; message?: string };
      if (session === this._session) this.fail(e.code, e.message);
    }
  }

  /** Ends the conversation (the workspace's concurrency slot is freed). */
  async stop(): Promise<void> {
    const session = this._session;
    if (!session) return;
    await session.stop();
    if (session === this._session) this.render();
  }

  setMuted(muted: boolean): void {
    this.muted = muted;
    this._session?.setMuted(muted);
    this.render();
  }

  sendText(raw: string): void {
    const text = raw.trim();
    const session = this._session;
    if (!text || !session) return;
    try {
      session.sendText(text);
    } catch (err) {
      const e = err as { code?: string; message?: string };
      this.fail(e.code, e.message);
      return;
    }
    this.lastTyped = text;
    this.addEntry('user', text);
    this.el.text.value = '';
  }

  private async loadProfile(): Promise<void> {
    this.profileLoad?.abort();
    const agentId = this.getAttribute('agent-id');
    this._profile = null;
    this.setMedia(null);
    if (!agentId) {
      this.profileLoad = null;
      this.setProfileStatus('not_found');
      this.announce('The widget needs an agent-id attribute.', true);
      return;
    }
    const load = new AbortController();
    this.profileLoad = load;
    this.setProfileStatus('loading');
    try {
      const res = await fetch(new URL(`api/v1/public/agents/${encodeURIComponent(agentId)}`, this.apiBase), {
        headers: { Accept: 'application/json' },
        credentials: 'omit',
        signal: load.signal,
      });
      if (res.status === 404) {
        this.setProfileStatus('not_found');
        this.announce('This voice agent does not exist.', true);
        return;
      }
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const profile = (await res.json()) as PublicAgentProfile;
      if (load.signal.aborted) return;
      this._profile = profile;
      const preselect = this.getAttribute('source');
      if (preselect === 'camera' || preselect === 'screen') this.setMedia(preselect);
      this.setProfileStatus('ready');
      this.announce('');
    } catch {
      if (load.signal.aborted) return;
      this.setProfileStatus('failed');
      this.announce('The voice agent service could not be reached.', true);
    } finally {
      if (this.profileLoad === load) this.profileLoad = null;
    }
  }

  private setProfileStatus(status: ProfileStatus): void {
    this._profileStatus = status;
    this.render();
    this.dispatch('voice-agent-profile', { status, profile: this._profile });
  }

  private setMedia(media: Media | null): void {
    const allowed = media === 'camera' ? this._profile?.realtime.enable_webcam : media === 'screen' ? this._profile?.realtime.enable_screen_share : true;
    this.selectedMedia = allowed ? media : null;
    this.render();
  }

  private onState(session: Session, state: SessionState): void {
    if (session !== this._session) return;
    // The agent ended the conversation: close it, which frees the slot.
    if (state === 'ended') {
      this.sessionNews = 'ended_by_agent';
      this.announce('The agent ended the conversation.');
      void session.stop();
    }
    if (state === 'closed' && this.sessionNews === 'live') this.announce('Conversation ended.');
    this.render();
    this.dispatch('voice-agent-state', { state });
  }

  private onTranscript(session: Session, t: Transcript): void {
    if (session !== this._session) return;
    if (!t.final) {
      this.el.caption.textContent = `${t.role === 'user' ? 'You' : this.agentName}: ${t.text}`;
      return;
    }
    this.el.caption.textContent = '';
    // A typed message may come back as the user's transcript: it is in the log already.
    if (t.role === 'user' && this.lastTyped !== null && t.text.trim() === this.lastTyped) {
      this.lastTyped = null;
      return;
    }
    if (t.text.trim()) this.addEntry(t.role, t.text);
  }

  private get agentName(): string {
    return this._profile?.name || 'Agent';
  }

  private addEntry(role: 'user' | 'model', text: string): void {
    const entry = document.createElement('p');
    entry.className = `entry ${role}`;
    entry.setAttribute('part', `entry ${role}`);
    const who = document.createElement('span');
    who.className = 'who';
    who.textContent = role === 'user' ? 'You' : this.agentName;
    const sep = document.createElement('span');
    sep.className = 'sr';
    sep.textContent = ': ';
    entry.append(who, sep, text);
    this.el.log.append(entry);
    this.el.log.scrollTop = this.el.log.scrollHeight;
    this.dispatch('voice-agent-transcript', { role, text });
  }

  private fail(code: string | undefined, message: string | undefined): void {
    this.sessionNews = 'error';
    this.announce(describeError(code, this.sessionSource), true);
    this.dispatch('voice-agent-error', { code: code ?? 'server_error', message: message ?? '' });
  }

  private announce(text: string, error = false): void {
    this.el.status.textContent = text;
    this.el.status.classList.toggle('error', error);
  }

  private dispatch(type: string, detail: unknown): void {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  /** Brings the controls in line with the profile and the session. */
  private render(): void {
    const { el } = this;
    const state = this.state;
    const active = this.active;
    const live = state === 'live';
    el.panel.dataset.state = state === 'ended' ? 'live' : state === 'closed' ? 'idle' : state;
    el.name.textContent = this._profile?.name ?? (this._profileStatus === 'loading' ? 'Loading…' : 'Voice agent');
    el.log.dataset.empty = this._profile ? `Press Start to talk to ${this._profile.name}.` : '';
    el.start.textContent = active ? 'End conversation' : 'Start conversation';
    el.start.disabled = !active && (this._profileStatus === 'loading' || this._profileStatus === 'not_found');
    el.mute.disabled = !live || this.sessionSource === 'text';
    el.mute.setAttribute('aria-pressed', String(this.muted));
    el.text.disabled = !live;
    el.send.disabled = !live;
    const realtime = this._profile?.realtime;
    this.mediaControl('camera', Boolean(realtime?.enable_webcam), `${CAMERA}Camera`, 'Use the camera');
    this.mediaControl('screen', Boolean(realtime?.enable_screen_share), `${SCREEN}Share screen`, 'Share your screen');
    for (const media of ['camera', 'screen'] as const) {
      const button = this.media[media];
      if (!button) continue;
      button.setAttribute('aria-pressed', String(active ? this.sessionSource === media : this.selectedMedia === media));
      button.disabled = active;
    }
  }

  /** Adds the camera or screen control when the agent permits that source, and removes it otherwise. */
  private mediaControl(media: Media, permitted: boolean, html: string, title: string): void {
    const existing = this.media[media];
    if (!permitted) {
      existing?.remove();
      this.media[media] = null;
      return;
    }
    if (existing) return;
    const button = document.createElement('button');
    button.type = 'button';
    button.id = media;
    button.setAttribute('part', `button ${media}`);
    button.title = `${title} in the next conversation`;
    button.innerHTML = html;
    button.addEventListener('click', () => this.setMedia(this.selectedMedia === media ? null : media));
    this.el.controls.insertBefore(button, media === 'camera' ? this.media.screen : null);
    this.media[media] = button;
  }
}
