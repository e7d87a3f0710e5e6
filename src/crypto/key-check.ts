/**
 * Instances sharing a database must share SECRETS_KEY, or each reads the others' secrets as garbage
 * (500s at read time, long after start). The database keeps the fingerprint of the key its secrets
 * are sealed with; an instance with another key refuses to start, saying so. A database from before
 * the fingerprint was kept gets it from the first instance whose key opens a stored secret.
 */
import type { Knex } from 'knex';
import type { SecretBox } from './secrets.js';
import { webhookSecretContext } from '../webhooks/service.js';

export class SecretsKeyMismatchError extends Error {}

const SETTING = 'secrets_key_fingerprint';

/** A sealed value already stored, if any, with its context (one kind of secret is enough to judge the key). */
async function anySealed(db: Knex): Promise<{ sealed: string; context: string } | undefined> {
  const row = await db('webhook_secrets').first('secret_sealed', 'workspace_id');
  return row ? { sealed: row.secret_sealed as string, context: webhookSecretContext(row.workspace_id as string) } : undefined;
}

export async function checkSecretsKey(db: Knex, box: SecretBox): Promise<void> {
  const mine = box.fingerprint();
  const stored = (await db('service_settings').where({ key: SETTING }).first('value'))?.value as string | undefined;
  if (stored === undefined) {
    const sealed = await anySealed(db);
    if (sealed !== undefined) {
      try {
        box.open(sealed.sealed, sealed.context);
      } catch {
        throw new SecretsKeyMismatchError(
          'SECRETS_KEY cannot open the secrets stored in this database: every instance on a database must use the key the first one used.',
        );
      }
    }
    await db('service_settings').insert({ key: SETTING, value: mine }).onConflict('key').ignore();
    return checkSecretsKey(db, box);
  }
  if (stored !== mine) {
    throw new SecretsKeyMismatchError(
      `SECRETS_KEY differs from the key this database's secrets are sealed with (fingerprint ${stored}, this instance's ${mine}): every instance on a database must use the same SECRETS_KEY.`,
    );
  }
}
