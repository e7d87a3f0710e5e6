/** Rules of the webhook registry, the signing secret and the delivery logs. No Koa here. */
import type { Logger } from 'pino';
import type { components } from '../../generated/openapi.js';
import type { SecretBox } from '../crypto/secrets.js';
import { notFound, otherWorkspace, unprocessable } from '../errors/api-error.js';
import type { Clock } from '../lib/clock.js';
import { newId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { OutboundPolicy } from '../net/outbound-guard.js';
import { checkTargetUrl } from '../net/target-url.js';
import { DEFAULT_KINDS, type EventKind } from './payloads.js';
import { newWebhookSecret } from './signing.js';
import type { DeliveryRow, SecretRow, WebhookRow, WebhookStore } from './store.js';
import { urlKey } from './url-key.js';

type Webhook = components['schemas']['Webhook'];
type WebhookDelivery = components['schemas']['WebhookDelivery'];

export const WEBHOOK_LIMIT = 20;

export interface WebhookSettings {
  /** How long the previous secret keeps signing after a rotation. */
  secretOverlapMs: number;
}

function toWebhook(row: WebhookRow): Webhook {
  return { webhook_id: row.id, url: row.url, events: row.events, created_at: row.created_at.toISOString() };
}

function toDelivery(row: DeliveryRow): WebhookDelivery {
  return {
    delivery_id: row.id,
    webhook_id: row.webhook_id,
    event: row.kind,
    event_id: row.event_id,
    target_url: row.target_url,
    call_id: row.call_id,
    batch_id: row.batch_id,
    status: row.status ?? 'failed',
    status_code: row.status_code,
    error: row.error,
    signed: row.signed ?? false,
    duration_ms: row.duration_ms ?? 0,
    created_at: (row.attempted_at ?? row.created_at).toISOString(),
  };
}

/** The context a workspace's webhook secret is sealed for (the previous one keeps it through a rotation). */
const webhookSecretContext = (workspaceId: string) => `webhook_secrets/${workspaceId}`;

export class WebhookService {
  constructor(
    private readonly store: WebhookStore,
    private readonly secrets: SecretBox,
    private readonly outbound: OutboundPolicy,
    private readonly clock: Clock,
    private readonly settings: WebhookSettings,
    private readonly log: Logger,
  ) {}

  /** Any one stored webhook secret as sealed, with its context: how an instance tells whether its SECRETS_KEY opens this database's secrets. */
  async sealedSample(): Promise<{ sealed: string; context: string } | undefined> {
    const row = await this.store.anySecret();
    return row ? { sealed: row.secret_sealed, context: webhookSecretContext(row.workspace_id) } : undefined;
  }

  /** Checks a target URL for registration: absolute http(s), and not a blocked address where it resolves. */
  private allowedUrl(url: string): Promise<void> {
    return checkTargetUrl(this.outbound, url, 'url', { acceptUnresolvable: true });
  }

  async register(workspaceId: string, body: { url: string; events?: EventKind[] }): Promise<{ webhook: Webhook; created: boolean }> {
    await this.allowedUrl(body.url);
    const result = await this.store.register(
      workspaceId,
      { id: newId('webhook'), url: body.url, urlKey: urlKey(body.url), events: body.events, defaultEvents: [...DEFAULT_KINDS] },
      WEBHOOK_LIMIT,
    );
    if ('limitReached' in result) {
      throw unprocessable('webhook_limit_reached', `A workspace can register at most ${WEBHOOK_LIMIT} webhooks; delete one first.`);
    }
    return { webhook: toWebhook(result.webhook), created: result.created };
  }

  list(workspaceId: string, params: PageParams): Promise<Page<Webhook>> {
    return this.store.listWebhooks(workspaceId, params, toWebhook);
  }

  private async owned(workspaceId: string, webhookId: string): Promise<WebhookRow> {
    const row = await this.store.getWebhook(webhookId);
    if (!row) throw notFound('webhook_not_found', `No webhook '${webhookId}' exists.`, 'webhook_id');
    if (row.workspace_id !== workspaceId) throw otherWorkspace('webhook');
    return row;
  }

  async updateEvents(workspaceId: string, webhookId: string, events: EventKind[]): Promise<Webhook> {
    await this.owned(workspaceId, webhookId);
    const row = await this.store.updateEvents(workspaceId, webhookId, events);
    if (!row) throw notFound('webhook_not_found', `No webhook '${webhookId}' exists.`, 'webhook_id');
    return toWebhook(row);
  }

  async remove(workspaceId: string, webhookId: string): Promise<{ status: 'deleted'; webhook_id: string }> {
    await this.owned(workspaceId, webhookId);
    if (!(await this.store.deleteWebhook(workspaceId, webhookId))) throw notFound('webhook_not_found', `No webhook '${webhookId}' exists.`, 'webhook_id');
    return { status: 'deleted', webhook_id: webhookId };
  }

  async deliveries(workspaceId: string, webhookId: string, params: PageParams): Promise<Page<WebhookDelivery>> {
    await this.owned(workspaceId, webhookId);
    return this.store.listDeliveries(workspaceId, { webhook_id: webhookId }, params, toDelivery);
  }

  /** The deliveries of one call's event; the calls domain checks the call exists and is this workspace's first. */
  callDeliveries(workspaceId: string, callId: string, params: PageParams): Promise<Page<WebhookDelivery>> {
    return this.store.listDeliveries(workspaceId, { call_id: callId }, params, toDelivery);
  }

  /** The deliveries of a batch's `batch.completed` events; the batches domain checks the batch first. */
  batchDeliveries(workspaceId: string, batchId: string, params: PageParams): Promise<Page<WebhookDelivery>> {
    return this.store.listDeliveries(workspaceId, { batch_id: batchId, kind: 'batch.completed' }, params, toDelivery);
  }

  // Secret

  private async secretRow(workspaceId: string): Promise<SecretRow> {
    return (
      (await this.store.getSecret(workspaceId)) ??
      (await this.store.insertSecret(workspaceId, this.secrets.seal(newWebhookSecret(), webhookSecretContext(workspaceId))))
    );
  }

  /** The workspace's secret, created on first need. */
  async secret(workspaceId: string): Promise<{ webhook_secret: string }> {
    return { webhook_secret: this.secrets.open((await this.secretRow(workspaceId)).secret_sealed, webhookSecretContext(workspaceId)) };
  }

  async rotate(workspaceId: string): Promise<{ webhook_secret: string; previous_secret_expires_at: string }> {
    await this.secretRow(workspaceId);
    const fresh = newWebhookSecret();
    const now = this.clock.now();
    const expires = new Date(now.getTime() + this.settings.secretOverlapMs);
    await this.store.rotateSecret(workspaceId, this.secrets.seal(fresh, webhookSecretContext(workspaceId)), now, expires);
    return { webhook_secret: fresh, previous_secret_expires_at: expires.toISOString() };
  }

  /**
   * The secrets a delivery is signed with: the current one, then the previous one while the rotation
   * overlap lasts. Null when the current secret cannot be loaded (for example it was sealed with
   * another SECRETS_KEY): the spec's "in rare cases the request is sent without a signature".
   */
  async signingSecrets(workspaceId: string, known?: SecretRow): Promise<string[] | null> {
    let row: SecretRow;
    let current: string;
    try {
      row = known ?? (await this.secretRow(workspaceId));
      current = this.secrets.open(row.secret_sealed, webhookSecretContext(workspaceId));
    } catch (err) {
      this.log.warn({ workspaceId, err: (err as Error).message }, 'webhook secret could not be loaded; delivering unsigned');
      return null;
    }
    const out = [current];
    if (row.previous_secret_sealed && row.previous_expires_at && row.previous_expires_at.getTime() > this.clock.now().getTime()) {
      try {
        out.push(this.secrets.open(row.previous_secret_sealed, webhookSecretContext(workspaceId)));
      } catch {
        this.log.warn({ workspaceId }, 'previous webhook secret could not be loaded; signing with the current one only');
      }
    }
    return out;
  }
}
