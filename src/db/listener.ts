/**
 * The instance's one PostgreSQL LISTEN connection, shared by every channel it listens on (call
 * signals, live events, webhook wake-ups, cache invalidations): one connection per instance instead of
 * one per channel, since connections are what a PostgreSQL serving several instances runs out of first.
 * A channel's notifications go to the handlers registered with `on`; a lost connection (or one that
 * could not be opened) is opened again after `retryMs`, so callers only need a fallback (a poll) for
 * what was sent while it was down. Payloads are given as sent (NOTIFY limits them to 8000 bytes). A
 * handler's `onListening` runs each time its channel is listened on again, the first time included:
 * whatever a caller kept up to date by notifications before then may have missed some.
 */
import pg from 'pg';
import type { Logger } from 'pino';

const CHANNEL = /^[a-z_][a-z0-9_]*$/;

interface Handler {
  onNotify: (payload: string | undefined) => void;
  onListening?: () => void;
}

export class Listener {
  private readonly channels = new Map<string, Handler[]>();
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private connecting: Promise<void> | undefined;
  private stopped = true;

  constructor(
    private readonly databaseUrl: string,
    private readonly log: Logger,
    private readonly opts: { retryMs?: number } = {},
  ) {}

  /** Registers a handler of `channel`'s notifications; listened on from `start` (at once when already listening). */
  on(channel: string, onNotify: Handler['onNotify'], opts: { onListening?: () => void } = {}): void {
    if (!CHANNEL.test(channel)) throw new Error(`not a channel name: ${channel}`);
    const handler = { onNotify, onListening: opts.onListening };
    const known = this.channels.get(channel);
    if (known) known.push(handler);
    else this.channels.set(channel, [handler]);
    const client = this.client;
    if (!client || known) {
      if (client) handler.onListening?.();
      return;
    }
    client.query(`listen ${channel}`).then(
      () => handler.onListening?.(),
      (err: Error) => this.lost(client, err),
    );
  }

  /** Resolves once listening, or once the first attempt failed (it is retried in the background). */
  start(): Promise<void> {
    this.stopped = false;
    this.connecting ??= this.connect().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** Whether notifications are arriving now. */
  get listening(): boolean {
    return this.client !== undefined;
  }

  private async connect(): Promise<void> {
    if (this.stopped || this.client) return;
    const client = new pg.Client({ connectionString: this.databaseUrl, application_name: 'vas-listen' });
    client.on('error', (err) => this.lost(client, err));
    client.on('notification', (n) => {
      for (const h of this.channels.get(n.channel) ?? []) {
        try {
          h.onNotify(n.payload);
        } catch (err) {
          this.log.error({ err, channel: n.channel }, 'notification handler failed');
        }
      }
    });
    try {
      await client.connect();
      // Channels registered while this runs are listened on too, before the connection is in use.
      const listened = new Set<string>();
      for (;;) {
        const missing = [...this.channels.keys()].filter((c) => !listened.has(c));
        if (!missing.length) break;
        await client.query(missing.map((c) => `listen ${c}`).join('; '));
        for (const c of missing) listened.add(c);
      }
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'could not LISTEN; retrying shortly');
      await client.end().catch(() => undefined);
      this.scheduleRetry();
      return;
    }
    for (const handlers of this.channels.values()) for (const h of handlers) h.onListening?.();
  }

  private lost(client: pg.Client, err: Error): void {
    if (this.client !== client) return;
    this.log.warn({ err: err.message }, 'LISTEN connection lost; listening again shortly');
    this.client = undefined;
    client.end().catch(() => undefined);
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.stopped || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.start();
    }, this.opts.retryMs ?? 2000);
    this.retry.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    this.retry = undefined;
    await this.connecting;
    await this.client?.end().catch(() => undefined);
    this.client = undefined;
  }
}
