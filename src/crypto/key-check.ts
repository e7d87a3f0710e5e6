/**
 * Instances sharing a database must share SECRETS_KEY, or each reads the others' secrets as garbage
 * (500s at read time, long after start). The database keeps the fingerprint of the key its secrets
 * are sealed with; an instance with another key refuses to start, saying so. A database from before
 * the fingerprint was kept gets it from the first instance whose key opens a stored secret.
 */
import type { Knex } from 'knex';
import type { SecretBox } from './secrets.js';

export class SecretsKeyMismatchError extends Error {}

const SETTING = 'secrets_key_fingerprint';

/** A sealed value already stored, with its context (one kind of secret is enough to judge the key). */
export interface SealedSample {
  sealed: string;
  context: string;
}

/** `sample` reads any one sealed value the database holds (none: undefined). */
export async function checkSecretsKey(db: Knex, box: SecretBox, sample: () => Promise<SealedSample | undefined>): Promise<void> {
  const mine = box.fingerprint();
  const stored = (await db('service_settings').where({ key: SETTING }).first('value'))?.value as string | undefined;
  if (stored === undefined) {
    const sealed = await sample();
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
    return checkSecretsKey(db, box, sample);
  }
  if (stored !== mine) {
    throw new SecretsKeyMismatchError(
      `SECRETS_KEY differs from the key this database's secrets are sealed with (fingerprint ${stored}, this instance's ${mine}): every instance on a database must use the same SECRETS_KEY.`,
    );
  }
}
