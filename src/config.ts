/**
 * Every environment variable the service reads, parsed and validated once at start-up.
 * A bad value stops start-up with a message naming the variable.
 */
import { z } from 'zod';
import path from 'node:path';
import ipaddr from 'ipaddr.js';
import { CARRIER_API_URL_VARIABLES, type Provider } from './carriers/index.js';

const durationMs = (def: number) => z.coerce.number().int().min(0).default(def);
/** A comma-separated list of model ids; unset when not given. */
const modelList = () =>
  z
    .string()
    .transform((s) =>
      s
        .split(',')
        .map((m) => m.trim())
        .filter(Boolean),
    )
    .optional();

const schema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  /**
   * The schema owner's connection, for migrations only; DATABASE_URL's role then needs no more than
   * reading and writing rows, and is granted that at each start (docs/security.md).
   */
  DATABASE_MIGRATION_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  EMBEDDED_PG_PORT: z.coerce.number().int().min(1).max(65535).default(54329),
  /** Connections the service's pool keeps to PostgreSQL at most (the job queue has its own few). */
  DATABASE_POOL_MAX: z.coerce.number().int().min(2).max(500).default(20),
  PUBLIC_BASE_URL: z
    .string()
    .url('must be an absolute http(s) URL')
    .regex(/^https?:\/\//, 'must start with http:// or https://')
    .optional(),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** Bearer token a metrics scraper sends to GET /metrics (ADMIN_TOKEN works too); neither set: /metrics answers 404. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  CORS_ORIGINS: z
    .string()
    .default('http://localhost:3000,http://127.0.0.1:3000,http://localhost:5173')
    .transform((s) =>
      s
        .split(',')
        .map((o) => o.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^https?:\/\/[^/]+$/, 'each origin must look like https://host[:port]'))),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  SECRETS_KEY: z
    .string()
    .regex(/^[A-Za-z0-9+/]{43}=$|^[0-9a-fA-F]{64}$/, 'must be 32 bytes as base64 (44 chars) or hex (64 chars)')
    .optional(),
  /** JSON request body limit in bytes. */
  BODY_LIMIT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(1024 * 1024),
  /** A client must send a request's headers within this (408 and the connection closed otherwise). */
  HTTP_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(100).default(15_000),
  /** A client must send a whole request, body included, within this (a 10 MB upload at 1 Mbit/s takes 80 s). */
  HTTP_REQUEST_TIMEOUT_MS: z.coerce.number().int().min(100).default(120_000),
  /**
   * Open connections (HTTP and WebSocket) one client address may hold; more are closed at once. Trusted proxies
   * are exempt, and so are carriers' media streams with a valid stream token and signed carrier callbacks being answered.
   */
  HTTP_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(1).default(256),
  /** Open connections the instance holds at most. */
  HTTP_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(10_000),
  /** Dashboard session lifetime. */
  SESSION_TTL_MS: durationMs(12 * 60 * 60 * 1000),
  /** `last_used_at` of an API key is written at most once per this interval. */
  KEY_LAST_USED_RESOLUTION_MS: durationMs(60_000),
  /** How long an agent's inbound setup URL has to answer before the call is answered with the agent's own settings. */
  INBOUND_SETUP_TIMEOUT_MS: durationMs(3_000),
  /**
   * On SIGTERM, how long live conversations (phone calls, web sessions) may run on to their natural end
   * while the instance drains (readiness 503, no new calls, sessions or jobs); those still live then
   * are ended with `end_reason` `shutdown`. Set the orchestrator's kill timeout above this plus SHUTDOWN_GRACE_MS.
   */
  SHUTDOWN_DRAIN_MS: durationMs(300_000),
  /**
   * New calls and sessions are refused (503 + `Retry-After`) and batches wait while the event loop's
   * delay p99 stays above this (ms) for two windows of OVERLOAD_SAMPLE_MS running: live conversations
   * need the loop every 20 ms. 0 turns the check off.
   */
  OVERLOAD_LOOP_DELAY_MS: durationMs(250),
  /** Likewise while at least this many queries keep waiting for a database connection through two windows (default: DATABASE_POOL_MAX); 0 turns it off. */
  OVERLOAD_DB_WAITING: z.coerce.number().int().min(0).optional(),
  OVERLOAD_SAMPLE_MS: z.coerce.number().int().min(50).default(1_000),
  /** After the drain: time for in-flight requests and for conversations ended at the deadline to be finalised before connections are cut. */
  SHUTDOWN_GRACE_MS: durationMs(10_000),
  /** Check every response against the contract: off, log (development default) or enforce (tests). */
  CONTRACT_CHECK: z.enum(['off', 'log', 'enforce']).optional(),
  /** Directory where the contract check records (operationId, status) pairs; tests set it. */
  CONTRACT_COVERAGE_DIR: z.string().optional(),
  /**
   * Hosts, IP addresses or CIDR ranges that webhooks, tools and MCP servers may call although they are
   * internal (comma-separated). Production refuses loopback/private/link-local/metadata addresses otherwise.
   */
  OUTBOUND_ALLOW_LIST: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((o) => o.trim())
        .filter(Boolean),
    ),
  /** Signup/login attempts per IP per minute. */
  AUTH_RATE_LIMIT_PER_MINUTE: z.coerce.number().int().min(1).default(30),
  /**
   * Per-process caches of agents and of which event kinds each workspace's webhooks list (src/db/notified-cache.ts),
   * kept right across instances by NOTIFY from triggers: an entry is used at most this long (a safety net), and
   * at most CACHE_MAX_ENTRIES per cache are kept. 0 in either turns the caches off.
   */
  CACHE_TTL_MS: durationMs(60_000),
  CACHE_MAX_ENTRIES: z.coerce.number().int().min(0).default(2_000),
  /** A lost LISTEN connection (call signals, live events, webhook wake-ups, cache invalidations) is opened again after this long. */
  LISTEN_RETRY_MS: durationMs(2_000),
  // MCP servers (src/mcp/).
  /** One connection attempt to an MCP server (initialize + tools/list): the contract says 10 seconds. */
  MCP_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(1).default(10_000),
  /** Lifetime of an OAuth `state` minted by authorizeMcpServer (the contract says 10 minutes). */
  MCP_OAUTH_STATE_TTL_MS: z.coerce
    .number()
    .int()
    .min(1)
    .default(10 * 60 * 1000),
  /** An OAuth access token is refreshed when it expires within this margin. */
  MCP_TOKEN_REFRESH_MARGIN_MS: durationMs(60_000),
  /** A connection kept for the tool calls of a conversation is closed after this long unused. */
  MCP_SESSION_IDLE_MS: z.coerce.number().int().min(1).default(60_000),
  /** Idempotency-Key: how long the first response is replayed (24 hours). */
  IDEMPOTENCY_TTL_MS: z.coerce
    .number()
    .int()
    .min(1)
    .default(24 * 60 * 60 * 1000),
  /** A request still `in_progress` after this long is presumed lost (crashed instance); its key may run again. */
  IDEMPOTENCY_LOCK_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(1)
    .default(5 * 60 * 1000),
  // Voice service (src/voice/).
  /**
   * ws:// or wss:// URL of a server speaking the Gemini Live BidiGenerateContent protocol (a bare host gets
   * the standard path). Unset: the sandbox voice service is started in-process.
   */
  VOICE_SERVICE_URL: z
    .string()
    .regex(/^wss?:\/\/[^\s]+$/, 'must be a ws:// or wss:// URL')
    .refine((s) => URL.canParse(s), 'must be a valid URL')
    .optional(),
  /** Sent as the `key` query parameter when set; never logged. Not required for a local endpoint. */
  GEMINI_API_KEY: z.string().min(1).optional(),
  VOICE_MODEL: z.string().min(1).default('gemini-live-2.5-flash-preview'),
  /**
   * The live models agents may choose (comma-separated; the catalogue, src/voice/catalogue.ts). Unset:
   * the models the voice adapter knows. `VOICE_MODEL` is always one of them.
   */
  VOICE_MODELS: modelList(),
  /** Model of the post-call analysis (generateContent on the voice service's host) of agents that choose none. */
  VOICE_ANALYSIS_MODEL: z.string().min(1).default('gemini-2.5-flash'),
  /**
   * The analysis models agents may choose (comma-separated; the catalogue's `analysis_models`). Unset:
   * the models the analysis knows. `VOICE_ANALYSIS_MODEL` is always one of them.
   */
  VOICE_ANALYSIS_MODELS: modelList(),
  /** One connection attempt (socket open + setupComplete) must finish within this. */
  VOICE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(1).default(10_000),
  /** Reconnection attempts after a failed or lost connection, before `unavailable`. */
  VOICE_RETRY_MAX: z.coerce.number().int().min(0).max(20).default(4),
  /** Backoff before retry n: VOICE_RETRY_BASE_MS * 2^(n-1), at most VOICE_RETRY_MAX_DELAY_MS. */
  VOICE_RETRY_BASE_MS: durationMs(250),
  VOICE_RETRY_MAX_DELAY_MS: durationMs(4_000),
  /**
   * Messages a session holds while the voice service reconnects. Beyond it the oldest audio/image is
   * dropped; a text or tool message that finds no audio/image to displace is refused (forward_failed).
   */
  VOICE_RECONNECT_QUEUE_LIMIT: z.coerce.number().int().min(1).default(500),
  /** Sandbox voice service: silence that ends a spoken user turn. */
  VOICE_SANDBOX_END_OF_TURN_MS: z.coerce.number().int().min(1).default(600),
  /** Sandbox voice service: agent speech per reply character, and playout speed (2 = twice real time). */
  VOICE_SANDBOX_MS_PER_CHAR: z.coerce.number().min(0).default(60),
  VOICE_SANDBOX_SPEED: z.coerce.number().min(0.1).max(1000).default(1),
  // Webhook delivery (src/webhooks/).
  /** Time a receiver has to answer one delivery (the spec: 10 seconds). */
  WEBHOOK_TIMEOUT_MS: z.coerce.number().int().min(1).default(10_000),
  /** Deliveries in flight at once per service instance (a quarter kept for workspaces with nothing in flight). */
  WEBHOOK_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(20),
  /** How often the dispatcher looks for deliveries raised elsewhere (another instance, before a restart). */
  WEBHOOK_POLL_INTERVAL_MS: z.coerce.number().int().min(10).default(1_000),
  /** After a rotation, how long the previous secret keeps signing `webhook-signature`. */
  WEBHOOK_SECRET_OVERLAP_MS: durationMs(24 * 60 * 60 * 1000),
  /** How long delivery records are kept. */
  WEBHOOK_DELIVERY_RETENTION_MS: durationMs(30 * 24 * 60 * 60 * 1000),
  /** Live events: queued events of this instance's conversations are written together this often. */
  EVENTS_FLUSH_MS: z.coerce.number().int().min(1).max(1000).default(25),
  /** An event stream gets a `: keepalive` comment (and reads again) this often. */
  EVENTS_HEARTBEAT_MS: z.coerce.number().int().min(100).max(300_000).default(15_000),
  /** Open event streams a workspace may hold on one instance (429 `event_stream_limit_reached` beyond). */
  EVENTS_MAX_STREAMS_PER_WORKSPACE: z.coerce.number().int().min(1).default(50),
  /** Events kept per conversation; beyond, only its `end` is still written. */
  EVENTS_MAX_PER_CONVERSATION: z.coerce.number().int().min(10).default(10_000),
  /** How long conversation events are kept, and how often the job removing older ones runs. */
  EVENTS_RETENTION_MS: z.coerce
    .number()
    .int()
    .min(60_000)
    .default(7 * 24 * 60 * 60 * 1000),
  EVENTS_RETENTION_SWEEP_MS: z.coerce.number().int().min(1000).default(3_600_000),
  // Realtime web sessions (src/realtime/).
  /** Lifetime of a realtime session token. */
  REALTIME_TOKEN_TTL_MS: durationMs(60_000),
  /** Session creations per workspace: REALTIME_SESSIONS_PER_HOUR per REALTIME_HOUR_WINDOW_MS, and per day. */
  REALTIME_SESSIONS_PER_HOUR: z.coerce.number().int().min(1).default(60),
  REALTIME_HOUR_WINDOW_MS: durationMs(60 * 60 * 1000),
  REALTIME_SESSIONS_PER_DAY: z.coerce.number().int().min(1).default(500),
  REALTIME_DAY_WINDOW_MS: durationMs(24 * 60 * 60 * 1000),
  /** WebSocket connection attempts per client IP per REALTIME_IP_WINDOW_MS (HTTP 429 before the upgrade beyond). */
  REALTIME_IP_ATTEMPTS: z.coerce.number().int().min(1).default(20),
  REALTIME_IP_WINDOW_MS: durationMs(60_000),
  /**
   * Peers (IPs or CIDRs, comma-separated) whose X-Forwarded-For is believed for the client address of
   * a WebSocket. Empty (default): the socket's own address is the client address.
   */
  TRUSTED_PROXIES: z
    .string()
    .default('')
    .transform((s) =>
      s
        .split(',')
        .map((o) => o.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().refine((p) => (p.includes('/') ? ipaddr.isValidCIDR(p) : ipaddr.isValid(p)), 'each entry must be an IP address or a CIDR range'))),
  /** Concurrency-slot leases: renewed every HEARTBEAT, counted until EXPIRY after the last renewal (< 60 s). */
  REALTIME_LEASE_HEARTBEAT_MS: durationMs(10_000),
  REALTIME_LEASE_EXPIRY_MS: z.coerce.number().int().min(1).max(59_999).default(30_000),
  /** A live web session's conversation so far is saved within this long of a change; one statement a tick for every session of the instance. */
  REALTIME_PROGRESS_SAVE_MS: durationMs(250),
  /** WebSocket ping interval; a peer that misses one pong is terminated. */
  REALTIME_PING_INTERVAL_MS: durationMs(15_000),
  /**
   * Frames a client sends before `session_started` (while the connection checks and the voice session
   * start run) are held up to this many frames and bytes; frames beyond are dropped and each answered
   * with `forward_failed` once the session starts (an apology `text` in a text session).
   */
  REALTIME_ADMISSION_HOLD_FRAMES: z.coerce.number().int().min(0).default(250),
  REALTIME_ADMISSION_HOLD_BYTES: z.coerce
    .number()
    .int()
    .min(0)
    .default(8 * 1024 * 1024),
  /**
   * How fast one realtime session's socket is read, bytes a second and at once; beyond, it is paused
   * (TCP holds the rest in the client) until the budget refills (src/realtime/read-budget.ts).
   */
  REALTIME_READ_BYTES_PER_SECOND: z.coerce.number().int().min(65_536).default(6_000_000),
  REALTIME_READ_BURST_BYTES: z.coerce
    .number()
    .int()
    .min(65_536)
    .default(8 * 1024 * 1024),
  /**
   * Audio budget of one realtime session: a client's `audio/pcm` beyond real time (times RATE) plus
   * BURST (how far ahead of real time it may run, wall ms) is dropped (not passed to the voice
   * service) and counted in `media_audio_dropped_seconds_total`.
   */
  REALTIME_AUDIO_RATE: z.coerce.number().min(0.1).max(1000).default(1),
  REALTIME_AUDIO_BURST_MS: durationMs(2_000),
  /**
   * Budgets of one realtime session, a second and at once: typed messages (`text/plain`, each a model
   * turn; a person sends at most about one a second) and images (`image/jpeg`; the client library
   * sends one a second). What is over is dropped, answered with `text_rate_limited` /
   * `image_rate_limited` once a run of drops (a text session: the agent's apology), and counted in `media_input_dropped_total`.
   */
  REALTIME_TEXT_RATE: z.coerce.number().min(0.01).max(1000).default(1),
  REALTIME_TEXT_BURST: z.coerce.number().int().min(1).max(10_000).default(10),
  REALTIME_IMAGE_RATE: z.coerce.number().min(0.01).max(1000).default(2),
  REALTIME_IMAGE_BURST: z.coerce.number().int().min(1).max(10_000).default(10),
  /** `no_audio_received`: an image this long after the first image with no audio received. */
  REALTIME_NO_AUDIO_AFTER_MS: durationMs(8_000),
  /** Tool calls of a realtime session: time limit, and delay before the agent says a filler line. */
  REALTIME_TOOL_TIMEOUT_MS: durationMs(10_000),
  REALTIME_TOOL_FILLER_MS: durationMs(1_500),
  /**
   * Size of a conversation record's transcript and tool-call records together (JSON bytes); what comes
   * after is not kept and the record says `transcript_truncated`, so a record always saves.
   */
  CONVERSATION_RECORD_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(512 * 1024),
  // Agent test runs (src/test-runs/).
  /** Test runs one workspace may have queued or running at once (more: 429 too_many_test_runs). */
  TEST_RUNS_ACTIVE_PER_WORKSPACE: z.coerce.number().int().min(1).max(1000).default(5),
  /** Test cases one instance runs at once, across runs (each run also keeps to its own `concurrency`). */
  TEST_RUNS_INSTANCE_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(20),
  /** How long the agent may take to finish answering one turn of a test (tool calls included): the case ends `reply_timeout`. */
  TEST_TURN_TIMEOUT_MS: z.coerce.number().int().min(100).default(30_000),
  /** How long one test case may run in all: it ends `case_timeout`. */
  TEST_CASE_TIMEOUT_MS: z.coerce.number().int().min(100).default(600_000),
  /** Metering: cents per started minute of a voice/camera/screen session, and of a text session. */
  REALTIME_CENTS_PER_MINUTE: z.coerce.number().int().min(0).default(10),
  REALTIME_TEXT_CENTS_PER_MINUTE: z.coerce.number().int().min(0).default(0),
  // Phone calls (src/calls/, src/carriers/) and the sandbox carriers (src/sandbox/). Each carrier's
  // REST API URL is the variable its plug-in names (PROVIDER_A_API_URL, ...), read by carrierApiUrls.
  /** Sandbox carriers: port (0 = any free one), time scale (2 = twice real time) and ringing time before an answer. */
  SANDBOX_CARRIERS_PORT: z.coerce.number().int().min(0).max(65535).default(0),
  SANDBOX_CARRIERS_SPEED: z.coerce.number().min(0.1).max(1000).default(1),
  SANDBOX_CARRIERS_RING_MS: durationMs(1_000),
  /** Seconds a call may ring before it is `no_answer` (the carrier's Timeout). */
  CALL_RING_TIMEOUT_S: z.coerce.number().int().min(5).max(600).default(60),
  /** Longest call in seconds (the carrier's TimeLimit; the bridge hangs up with `time_limit`). */
  CALL_MAX_DURATION_S: z.coerce
    .number()
    .int()
    .min(1)
    .max(4 * 60 * 60)
    .default(60 * 60),
  /** Neither side spoke for this long: the agent hangs up (`silence_timeout`). */
  CALL_SILENCE_TIMEOUT_MS: durationMs(30_000),
  /**
   * Transfers the agent may try on one call (its `transfer_call` tool); a refused or failed attempt
   * counts. At most 3: a call's `transfers` in the contract hold at most three entries.
   */
  TRANSFER_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(3).default(3),
  /** Keys the person presses form one input to the model until `#`, 64 keys, or this long without a key. */
  CALL_DTMF_GAP_MS: z.coerce.number().int().min(100).max(60_000).default(2000),
  /**
   * Keys a call's caller may press, a second and at once (DTMF needs at least 40 ms of tone and 40 ms
   * of pause a key, so no phone sends more than 12.5 a second; people type fewer). Keys beyond are
   * dropped before they reach the agent and counted in `media_input_dropped_total`. With the
   * in-process sandbox carriers the rate is multiplied by their SANDBOX_CARRIERS_SPEED.
   */
  CALL_DTMF_RATE: z.coerce.number().min(0.01).max(1000).default(10),
  CALL_DTMF_BURST: z.coerce.number().int().min(1).max(10_000).default(20),
  /** Metering: cents per started minute of a phone call (from answer to hang-up). */
  CALL_CENTS_PER_MINUTE: z.coerce.number().int().min(0).default(10),
  /** How long the carrier has to accept a dial request before the call counts as lost (added to its deadline). */
  CALL_DIAL_GRACE_MS: durationMs(30_000),
  /**
   * A live call is renewed every CALL_HEARTBEAT_MS by the instance running its media; one not renewed for
   * CALL_ORPHAN_AFTER_MS (that instance died) is ended and finalised by any instance.
   */
  CALL_HEARTBEAT_MS: durationMs(10_000),
  /** A live call's conversation so far is saved within this long of a change (what a crash can lose); one statement a tick for every call of the instance. */
  CALL_PROGRESS_SAVE_MS: durationMs(1000),
  CALL_ORPHAN_AFTER_MS: z.coerce.number().int().min(1).default(45_000),
  /** After the carrier reports the end while the media stream is still open, the bridge has this long to finish. */
  CALL_STATUS_GRACE_MS: durationMs(15_000),
  /**
   * Audio budget of one call's media stream: caller audio beyond real time (times RATE) plus BURST
   * (how far ahead of real time it may run, wall ms) is dropped before transcoding and counted in `media_audio_dropped_seconds_total`. With the in-process sandbox carriers
   * the rate is at least their SANDBOX_CARRIERS_SPEED (they send media that much faster).
   */
  CALL_AUDIO_RATE: z.coerce.number().min(0.1).max(1000).default(1),
  CALL_AUDIO_BURST_MS: durationMs(2_000),
  /** Where recordings are kept: `postgres` (the service's database, in chunks) or `s3` (an S3-compatible bucket). */
  RECORDING_STORAGE: z.enum(['postgres', 's3']).default('postgres'),
  /** S3-compatible storage: endpoint URL (unset: AWS for the region), bucket, region, credentials, key prefix, path-style addressing. */
  RECORDING_S3_ENDPOINT: z.string().url('must be an absolute URL').optional(),
  RECORDING_S3_BUCKET: z.string().min(3).max(63).optional(),
  RECORDING_S3_REGION: z.string().min(1).default('us-east-1'),
  RECORDING_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  RECORDING_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  RECORDING_S3_PREFIX: z.string().max(200).default('recordings/'),
  RECORDING_S3_FORCE_PATH_STYLE: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /** A recording's audio is written this often (a crash loses at most this much). */
  RECORDING_FLUSH_MS: z.coerce.number().int().min(50).max(60_000).default(1000),
  /** A recording its conversation redacts holds audio until what was said in it is known, at most this long (older audio is written as silence). */
  RECORDING_REDACTION_HOLD_MS: z.coerce.number().int().min(1000).max(300_000).default(30_000),
  /** Largest recording (PCM bytes); the rest of a longer conversation is not recorded (`truncated`). Default 128 MiB: over an hour of a phone call. */
  RECORDING_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(128 * 1024 * 1024),
  /** Key of recording links' signatures (at least 32 characters); unset: derived from SECRETS_KEY. Instances sharing a database must share it. */
  RECORDING_URL_SECRET: z.string().min(32, 'must be at least 32 characters').optional(),
  /** How long a `recording_url` works after the record or event carrying it was made. */
  RECORDING_URL_TTL_S: z.coerce
    .number()
    .int()
    .min(1)
    .max(7 * 86_400)
    .default(86_400),
  /** Days a recording is kept unless its workspace sets its own retention. */
  RECORDING_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** How often the retention job looks for expired recordings. */
  RECORDING_RETENTION_SWEEP_MS: z.coerce.number().int().min(1000).default(3_600_000),
  /** How often the transcript retention job erases conversations past their workspace's `transcript_retention_days`. */
  TRANSCRIPT_RETENTION_SWEEP_MS: z.coerce.number().int().min(10).default(3_600_000),
  /** A carrier's media WebSocket must send its `start` message within this. */
  CALL_STREAM_START_TIMEOUT_MS: z.coerce.number().int().min(1).default(10_000),
  /** One REST request to a carrier. */
  CARRIER_TIMEOUT_MS: z.coerce.number().int().min(1).default(10_000),
  /** Background jobs (dialing, call deadlines) run at once per instance, and how often the queue is polled besides LISTEN/NOTIFY. */
  JOBS_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(8),
  JOBS_POLL_INTERVAL_MS: z.coerce.number().int().min(50).default(500),
  /** After the job runner stops on a database error (a job's completion not written), a new one starts after this. */
  JOBS_RESTART_DELAY_MS: z.coerce.number().int().min(1).default(1000),
  /** Document text extraction runs in this many worker threads, each file within this time (else 422). */
  KNOWLEDGE_EXTRACT_THREADS: z.coerce.number().int().min(1).max(16).default(1),
  KNOWLEDGE_EXTRACT_TIMEOUT_MS: z.coerce.number().int().min(100).default(20_000),
  /**
   * Tenants' JSON Schemas (analysis schemas, tool parameters) are compiled and values validated against
   * them in this many worker threads, served round-robin between workspaces, each task within this time.
   */
  SCHEMA_POOL_THREADS: z.coerce.number().int().min(1).max(16).default(2),
  SCHEMA_TASK_TIMEOUT_MS: z.coerce.number().int().min(100).default(10_000),
  /** Calls a batch writes per dispatch transaction (a larger concurrency is filled by consecutive rounds). */
  BATCH_DISPATCH_CHUNK: z.coerce.number().int().min(1).max(1000).default(100),
  /** A batch's dispatch round runs this long after a call of it ends; calls ending meanwhile share the round. */
  BATCH_WAKE_DELAY_MS: z.coerce.number().int().min(0).max(5_000).default(50),
  /** How soon a batch looks again for a free slot when its workspace had none. */
  BATCH_CAPACITY_RETRY_MS: z.coerce.number().int().min(10).default(1_000),
  /** A workspace's batches not yet over (429 `batch_limit_reached` past it). */
  BATCH_MAX_OPEN_PER_WORKSPACE: z.coerce.number().int().min(1).default(100),
  /** Recipients waiting across a workspace's batches (429 `pending_recipient_limit_reached` past it). */
  BATCH_MAX_WAITING_RECIPIENTS_PER_WORKSPACE: z.coerce.number().int().min(1).default(100_000),
  /** Numbers a workspace's do-not-call list may hold (422 `do_not_call_list_full` past it; an opt-out is listed anyway). */
  DO_NOT_CALL_MAX_ENTRIES: z.coerce.number().int().min(1).default(2_000_000),
  /**
   * Seconds in a metering minute: conversations are billed per started minute at the per-minute
   * prices, plan minutes and reservations count in it. 60; tests shorten it so a reservation runs out
   * in seconds.
   */
  METERING_MINUTE_S: z.coerce.number().int().min(1).max(60).default(60),
  /** Minutes of credit and plan time a live conversation holds at a time (taken at admission, then one slice after another). */
  RESERVATION_MINUTES: z.coerce.number().int().min(1).max(60).default(2),
  /** A live conversation asks for its next slice this long before its reservation runs out. */
  RESERVATION_RENEW_BEFORE_MS: durationMs(20_000),
  // The SIP user agent (src/sip/, docs/sip.md). Unset SIP_PORT: no SIP.
  /** UDP and TCP port of the SIP user agent (0: a free one). */
  SIP_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  /** Interface the SIP and RTP sockets bind to. */
  SIP_HOST: z.string().min(1).default('0.0.0.0'),
  /** The address trunks and phones reach this instance at (Via, Contact, SDP); required with SIP_PORT in production. */
  SIP_ADVERTISED_ADDRESS: z
    .string()
    .refine((s) => ipaddr.isValid(s), 'must be an IP address')
    .optional(),
  SIP_TRANSPORTS: z
    .string()
    .default('udp,tcp')
    .transform((s) =>
      s
        .split(',')
        .map((t) => t.trim().toLowerCase())
        .filter(Boolean),
    )
    .pipe(z.array(z.enum(['udp', 'tcp', 'tls'])).min(1)),
  /** SIP over TLS: its port and the certificate chain and key (PEM files); TLS is on when both paths are set. */
  SIP_TLS_PORT: z.coerce.number().int().min(0).max(65535).default(5061),
  SIP_TLS_CERT_PATH: z.string().min(1).optional(),
  SIP_TLS_KEY_PATH: z.string().min(1).optional(),
  /** UDP ports calls' RTP may take (one even port per call). */
  SIP_RTP_PORT_MIN: z.coerce.number().int().min(1024).max(65534).default(10_000),
  SIP_RTP_PORT_MAX: z.coerce.number().int().min(1025).max(65535).default(20_000),
  /** RFC 3261's timers: round-trip estimate, longest retransmission interval, how long a message may live in the network. */
  SIP_T1_MS: z.coerce.number().int().min(10).default(500),
  SIP_T2_MS: z.coerce.number().int().min(10).default(4_000),
  SIP_T4_MS: z.coerce.number().int().min(10).default(5_000),
  /** How long a digest nonce we issue may be answered (each one once). */
  SIP_NONCE_TTL_MS: durationMs(30_000),
  /** Refused requests (403, wrong digest, malformed) a source address may earn a minute; beyond, it is ignored. */
  SIP_REFUSALS_PER_MINUTE: z.coerce.number().int().min(1).default(10),
  /** Packets the RTP jitter buffer may hold back to put late ones in order (20 ms each). */
  SIP_JITTER_PACKETS: z.coerce.number().int().min(0).max(50).default(3),
  /**
   * true: what callers send is handed to the conversation at the shared RTP clock's tick, every call's
   * at once (less CPU a call, up to 20 ms more on the way to the voice service); false: as it arrives.
   */
  SIP_RTP_RECEIVE_ON_TICK: z
    .enum(['true', 'false'])
    .default('true')
    .transform((v) => v === 'true'),
  /** Session-Expires asked for on outbound calls (RFC 4028), seconds; 0: none. */
  SIP_SESSION_EXPIRES_S: z.coerce.number().int().min(0).max(86_400).default(1_800),
  /** The shortest session interval a peer may ask for (Min-SE; shorter: 422). RFC 4028 says at least 90; tests shorten it. */
  SIP_MIN_SESSION_EXPIRES_S: z.coerce.number().int().min(1).max(86_400).default(90),
  /** SIP TCP/TLS connections open at once, and how long an unused one stays open. */
  SIP_MAX_CONNECTIONS: z.coerce.number().int().min(1).default(1_000),
  SIP_IDLE_CONNECTION_MS: durationMs(120_000),
  /**
   * Plan usage limit (4028 "Plan limit"): web-session minutes per calendar month (UTC) per plan,
   * `plan=minutes` comma-separated; a plan not listed is unlimited.
   */
  REALTIME_PLAN_MINUTES: z
    .string()
    .default('trial=600,starter=5000,growth=50000')
    .transform((s, ctx) => {
      const out: Record<string, number> = {};
      for (const part of s
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)) {
        const m = /^([a-z_]+)=(\d+)$/.exec(part);
        if (!m) {
          ctx.addIssue({ code: 'custom', message: `'${part}' must look like plan=minutes` });
          return z.NEVER;
        }
        out[m[1]] = Number(m[2]);
      }
      return out;
    }),
});

/**
 * The base URL of each carrier's REST API, from the variable named after it (`<PROVIDER>_API_URL`,
 * CARRIER_API_URL_VARIABLES: `PROVIDER_A_API_URL` for provider_a's, `https://api.twilio.com`; `PROVIDER_B_API_URL` for
 * provider_b's, `https://api.telnyx.com/v2`). Unset: the sandbox carrier of that provider, started
 * in-process (not allowed in production).
 */
const carrierApiUrls = z.object(
  Object.fromEntries(
    CARRIER_API_URL_VARIABLES.map(([, variable]) => [
      variable,
      z
        .string()
        .url('must be an absolute http(s) URL')
        .regex(/^https?:\/\//, 'must start with http:// or https://')
        .optional(),
    ]),
  ),
);

export type Config = z.infer<typeof schema> & {
  /** Each carrier's REST API base URL that is configured (see carrierApiUrls); a carrier left out runs on its sandbox simulator. */
  carrierApiUrls: Partial<Record<Provider, string>>;
  publicBaseUrl: string;
  contractCheck: 'off' | 'log' | 'enforce';
  dataDir: string;
};

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means unset (as in `ADMIN_TOKEN= npm start`).
  const set = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== ''));
  const parsed = schema.safeParse(set);
  const carriers = carrierApiUrls.safeParse(set);
  if (!parsed.success || !carriers.success) {
    const issues = [...(parsed.error?.issues ?? []), ...(carriers.error?.issues ?? [])];
    const lines = issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const c = parsed.data;
  if (c.VOICE_SERVICE_URL && !c.GEMINI_API_KEY && /(^|\.)googleapis\.com$/.test(new URL(c.VOICE_SERVICE_URL).hostname)) {
    throw new ConfigError('Invalid configuration:\n  GEMINI_API_KEY: required when VOICE_SERVICE_URL is a googleapis.com endpoint');
  }
  if (c.CALL_HEARTBEAT_MS >= c.CALL_ORPHAN_AFTER_MS) {
    throw new ConfigError(
      `Invalid configuration:\n  CALL_HEARTBEAT_MS: must be less than CALL_ORPHAN_AFTER_MS (${c.CALL_ORPHAN_AFTER_MS}), or live calls look orphaned between renewals`,
    );
  }
  if (c.RESERVATION_RENEW_BEFORE_MS >= c.RESERVATION_MINUTES * c.METERING_MINUTE_S * 1000) {
    throw new ConfigError(
      `Invalid configuration:\n  RESERVATION_RENEW_BEFORE_MS: must be less than a reservation slice (RESERVATION_MINUTES x METERING_MINUTE_S = ${c.RESERVATION_MINUTES * c.METERING_MINUTE_S * 1000} ms)`,
    );
  }
  if (c.REALTIME_LEASE_HEARTBEAT_MS >= c.REALTIME_LEASE_EXPIRY_MS) {
    throw new ConfigError(
      `Invalid configuration:\n  REALTIME_LEASE_HEARTBEAT_MS: must be less than REALTIME_LEASE_EXPIRY_MS (${c.REALTIME_LEASE_EXPIRY_MS}), or leases expire between renewals`,
    );
  }
  if (c.SIP_RTP_PORT_MIN >= c.SIP_RTP_PORT_MAX) {
    throw new ConfigError('Invalid configuration:\n  SIP_RTP_PORT_MAX: must be above SIP_RTP_PORT_MIN');
  }
  if (!c.SIP_TLS_CERT_PATH !== !c.SIP_TLS_KEY_PATH) {
    throw new ConfigError('Invalid configuration:\n  SIP_TLS_KEY_PATH: SIP_TLS_CERT_PATH and SIP_TLS_KEY_PATH go together');
  }
  if (c.SIP_TRANSPORTS.includes('tls') && !c.SIP_TLS_CERT_PATH) {
    throw new ConfigError('Invalid configuration:\n  SIP_TLS_CERT_PATH: required when SIP_TRANSPORTS includes tls');
  }
  if (c.NODE_ENV === 'production' && c.SIP_PORT !== undefined && !c.SIP_ADVERTISED_ADDRESS) {
    throw new ConfigError('Invalid configuration:\n  SIP_ADVERTISED_ADDRESS: required with SIP_PORT when NODE_ENV=production');
  }
  if (c.RECORDING_STORAGE === 's3' && !c.RECORDING_S3_BUCKET) {
    throw new ConfigError('Invalid configuration:\n  RECORDING_S3_BUCKET: required when RECORDING_STORAGE=s3');
  }
  if (c.NODE_ENV === 'production') {
    if (!c.SECRETS_KEY) throw new ConfigError('Invalid configuration:\n  SECRETS_KEY: required when NODE_ENV=production');
    if (!c.PUBLIC_BASE_URL) throw new ConfigError('Invalid configuration:\n  PUBLIC_BASE_URL: required when NODE_ENV=production');
    if (!c.VOICE_SERVICE_URL)
      throw new ConfigError(
        'Invalid configuration:\n  VOICE_SERVICE_URL: required when NODE_ENV=production (the sandbox voice service is for development and tests)',
      );
    for (const [, name] of CARRIER_API_URL_VARIABLES) {
      if (!carriers.data[name])
        throw new ConfigError(`Invalid configuration:\n  ${name}: required when NODE_ENV=production (the sandbox carriers are for development and tests)`);
    }
  }
  const host = c.HOST === '0.0.0.0' || c.HOST === '::' ? 'localhost' : c.HOST;
  return {
    ...c,
    carrierApiUrls: Object.fromEntries(CARRIER_API_URL_VARIABLES.flatMap(([provider, name]) => (carriers.data[name] ? [[provider, carriers.data[name]]] : []))),
    dataDir: path.resolve(c.DATA_DIR),
    publicBaseUrl: (c.PUBLIC_BASE_URL ?? `http://${host}:${c.PORT}`).replace(/\/+$/, ''),
    contractCheck: c.CONTRACT_CHECK ?? (c.NODE_ENV === 'production' ? 'off' : 'log'),
  };
}
