/**
 * The rooms of src/ and the direction their imports run: a room may import rooms of its own layer or
 * below, never above, and no two rooms import each other (test/unit/import-graph.test.ts checks the
 * whole graph; eslint.config.js turns each room's forbidden rooms into no-restricted-imports errors).
 * The files at the top of src/ (main.ts, service.ts, app.ts) assemble everything and may import any
 * room; config.ts and log.ts are read by all.
 */

/** Lowest first. */
export const LAYERS = [
  // Foundations: no domain knowledge. http/ is the contract wiring the domains' routes plug into.
  // redaction: finding personal data in text and replacing it (agents check the setting with it, the
  // conversations apply it at each place they keep or send what was said).
  ['lib', 'audio', 'errors', 'contract', 'crypto', 'net', 'db', 'jobs', 'http', 'redaction'],
  // Our peers, as adapters: what a carrier is, what the voice service is, and the SIP user agent
  // (the protocol stack a SIP carrier adapter builds on; it knows no carrier).
  ['carriers', 'voice', 'sip'],
  // Domains that stand alone, and the simulators of our peers. destinations: which numbers a
  // workspace may call (agents check transfer numbers with it, so it imports no other domain).
  // events: conversations' live events, stored, streamed (SSE) and expired; it knows no call or
  // session (calls and realtime check who may read a conversation and feed it). sip-trunks: SIP
  // trunks and the inbound trust decision (it reads agents; agents take its check as an interface).
  // do-not-call: the numbers a workspace's people asked not to be called on (it reads numbers through
  // destinations, which imports no other domain). agent-tests: an agent's scripted tests (it reads
  // agents; they are not part of an agent's versions).
  ['workspaces', 'destinations', 'do-not-call', 'agents', 'agent-tests', 'tools', 'sip-trunks', 'knowledge', 'mcp', 'webhooks', 'events', 'system', 'sandbox'],
  // The engine web sessions and phone calls share; recordings of conversations (calls record through
  // them, so they know no call).
  ['conversation', 'recordings'],
  // Conversations: web sessions and phone calls; test-runs: agent tests run as text conversations with
  // mocked tools (it takes only the phone built-ins' declarations from calls, never a call).
  ['realtime', 'calls', 'test-runs'],
  // Campaigns of calls; erasure: a finished conversation's erasure and the transcript retention
  // sweep, across the tables of the rooms below that hold what it said.
  ['batches', 'erasure'],
];

/** Files at the top of src/ that only assemble (they may import any room). */
export const ASSEMBLY = ['main.ts', 'service.ts', 'app.ts'];

/** Rooms only the assembly may import (the service starts them; nothing uses their insides). */
export const STARTED_ONLY = ['sandbox'];

/** Rooms with a narrower rule than their layer's: what they must never import, packages included. */
export const PURE = {
  // A carrier is an adapter and nothing else: no call, agent, database or API error of ours.
  carriers: { rooms: ['errors', 'db', 'jobs', 'http', 'contract', 'crypto', 'voice'], packages: ['knex', 'pg', 'koa'] },
  // The SIP stack is protocol only: no carrier, call, database or API error of ours.
  sip: { rooms: ['errors', 'db', 'jobs', 'http', 'contract', 'crypto', 'voice', 'carriers'], packages: ['knex', 'pg', 'koa'] },
};

export const ROOMS = LAYERS.flat();

export function layerOf(room) {
  return LAYERS.findIndex((layer) => layer.includes(room));
}

/** The rooms `room` may not import. */
export function forbiddenFor(room) {
  const layer = layerOf(room);
  const above = LAYERS.slice(layer + 1).flat();
  const started = STARTED_ONLY.filter((r) => r !== room);
  return [...new Set([...above, ...started, ...(PURE[room]?.rooms ?? [])])];
}
