/**
 * One PostgreSQL LISTEN connection that stays up: a channel's notifications go to `onNotify`; a lost
 * connection (or one that could not be opened) is opened again after `retryMs`, so callers only need
 * a fallback (a poll) for what was sent while it was down. Payloads are given as sent (NOTIFY limits
 * them to 8000 bytes). `onListening` runs each time the connection is listening again, the first time
 * included: whatever a caller kept up to date by notifications before then may have missed some.
 */
import pg from 'pg';
import type { Logger } from 'pino';

const CHANNEL = /^[a-z_][a-z0-9_]*$/;

export class Listener {
  private client: pg.Client | undefined;
  private retry: NodeJS.Timeout | undefined;
  private connecting: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly channel: string,
    private readonly onNotify: (payload: string | undefined) => void,
    private readonly log: Logger,
    private readonly opts: { retryMs?: number; onListening?: () => void } = {},
  ) {
    if (!CHANNEL.test(channel)) throw new Error(`not a channel name: ${channel}`);
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
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on('error', (err) => {
      this.log.warn({ err: err.message, channel: this.channel }, 'LISTEN connection lost; listening again shortly');
      if (this.client === client) this.client = undefined;
      client.end().catch(() => undefined);
      this.scheduleRetry();
    });
    client.on('notification', (n) => {
      if (n.channel === this.channel) this.onNotify(n.payload);
    });
    try {
      await client.connect();
      await client.query(`listen ${this.channel}`);
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
    } catch (err) {
      this.log.warn({ err: (err as Error).message, channel: this.channel }, 'could not LISTEN; retrying shortly');
      await client.end().catch(() => undefined);
      this.scheduleRetry();
      return;
    }
    this.opts.onListening?.();
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
