/** One pino line per request, and Prometheus request metrics, both labelled by operationId. */
import type { Context } from 'koa';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';

/** Records a finished request (front-door.ts calls it once per request, after the answer is settled). */
/** `start` is `performance.now()` when the request arrived. */
export function requestObserver(log: Logger, registry: Registry): (ctx: Context, start: number) => void {
  const requests = new Counter({
    name: 'http_requests_total',
    help: 'Requests by operation and status.',
    labelNames: ['operation', 'status'],
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'http_request_duration_seconds',
    help: 'Request duration by operation.',
    labelNames: ['operation'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  // The access line is six fixed scalar fields, none of them a name in REDACT_PATHS (src/log.ts), so the
  // logger's redaction cannot change it; it costs about 40 us a line (pino walks its wildcard paths over
  // every field), more than the rest of a request's routing. This logger writes only that line.
  const access = log.child({}, { redact: { paths: [] } });
  return (ctx, start) => {
    const seconds = (performance.now() - start) / 1e3;
    const operation = ctx.state.operationId ?? 'unrouted';
    requests.inc({ operation, status: String(ctx.status) });
    duration.observe({ operation }, seconds);
    if (!access.isLevelEnabled('info')) return;
    // The path only: query strings can carry tokens (OAuth codes, WebSocket tokens).
    access.info(
      { requestId: ctx.state.requestId, method: ctx.method, path: ctx.path, operationId: operation, status: ctx.status, ms: Math.round(seconds * 1e4) / 10 },
      'request',
    );
  };
}
