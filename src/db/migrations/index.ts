/**
 * Migrations are listed here in order (rather than discovered from the file system) so that they run
 * the same from TypeScript sources, a bundle, or tests, and a missing file fails the type check.
 */
import type { Knex } from 'knex';
import * as m001 from './001_workspaces.js';
import * as m002 from './002_agents.js';
import * as m003 from './003_webhooks.js';
import * as m004 from './004_mcp.js';
import * as m005 from './005_idempotency.js';
import * as m006 from './006_realtime.js';
import * as m007 from './007_auth_attempts.js';
import * as m008 from './008_usage.js';
import * as m009 from './009_calls.js';
import * as m010 from './010_batches.js';
import * as m011 from './011_durable_sessions.js';
import * as m012 from './012_webhook_fair_claims.js';
import * as m013 from './013_service_settings.js';
import * as m014 from './014_realtime_token_minter.js';
import * as m015 from './015_realtime_ip_attempt_log.js';
import * as m016 from './016_destinations_policy.js';
import * as m017 from './017_results_analysis.js';
import * as m018 from './018_reservations.js';
import * as m019 from './019_batch_attempts_slots.js';
import * as m022 from './022_usage_by_agent.js';
import * as m023 from './023_transfers_inbound_setup.js';
import * as m024 from './024_call_alive_at.js';
import * as m026 from './026_recordings.js';
import * as m027 from './027_conversation_events.js';
import * as m028 from './028_web_session_recordings.js';
import * as m029 from './029_conversation_event_heads.js';
import * as m030 from './030_cache_invalidations.js';
import * as m031 from './031_recording_encoding.js';
import * as m032 from './032_event_kinds_from_contract.js';
import * as m033 from './033_credential_invalidations.js';
import * as m034 from './034_sip_trunks.js';
import * as m035 from './035_do_not_call.js';
import * as m036 from './036_erasure.js';
import * as m037 from './037_do_not_call_counts.js';
import * as m038 from './038_redaction.js';
import * as m039 from './039_sip_provider.js';
import * as m040 from './040_agent_model.js';
import * as m041 from './041_carrier_accounts.js';
import * as m042 from './042_conversation_settings.js';
import * as m043 from './043_analysis_model.js';
import * as m044 from './044_agent_versions.js';
import * as m045 from './045_recipient_conversation.js';
import * as m046 from './046_batch_agent_version.js';
import * as m047 from './047_session_agent_version.js';
import * as m048 from './048_versioned_links.js';
import * as m049 from './049_agent_tests.js';
import * as m050 from './050_call_transfers.js';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

const migrations: Array<[string, Migration]> = [
  ['001_workspaces', m001],
  ['002_agents', m002],
  ['003_webhooks', m003],
  ['004_mcp', m004],
  ['005_idempotency', m005],
  ['006_realtime', m006],
  ['007_auth_attempts', m007],
  ['008_usage', m008],
  ['009_calls', m009],
  ['010_batches', m010],
  ['011_durable_sessions', m011],
  ['012_webhook_fair_claims', m012],
  ['013_service_settings', m013],
  ['014_realtime_token_minter', m014],
  ['015_realtime_ip_attempt_log', m015],
  ['016_destinations_policy', m016],
  ['017_results_analysis', m017],
  ['018_reservations', m018],
  ['019_batch_attempts_slots', m019],
  ['022_usage_by_agent', m022],
  ['023_transfers_inbound_setup', m023],
  ['024_call_alive_at', m024],
  ['026_recordings', m026],
  ['027_conversation_events', m027],
  ['028_web_session_recordings', m028],
  ['029_conversation_event_heads', m029],
  ['030_cache_invalidations', m030],
  ['031_recording_encoding', m031],
  ['032_event_kinds_from_contract', m032],
  ['033_credential_invalidations', m033],
  ['034_sip_trunks', m034],
  ['035_do_not_call', m035],
  ['036_erasure', m036],
  ['037_do_not_call_counts', m037],
  ['038_redaction', m038],
  ['039_sip_provider', m039],
  ['040_agent_model', m040],
  ['041_carrier_accounts', m041],
  ['042_conversation_settings', m042],
  ['043_analysis_model', m043],
  ['044_agent_versions', m044],
  ['045_recipient_conversation', m045],
  ['046_batch_agent_version', m046],
  ['047_session_agent_version', m047],
  ['048_versioned_links', m048],
  ['049_agent_tests', m049],
  ['050_call_transfers', m050],
];

export const migrationSource: Knex.MigrationSource<[string, Migration]> = {
  getMigrations: async () => migrations,
  getMigrationName: ([name]) => name,
  getMigration: async ([, migration]) => migration,
};
