/**
 * Browser client of the voice agent service. One ES module, served at `/sdk/voice-agent-client.js`.
 *
 * ```js
 * import { createSession } from 'https://voice.example.com/sdk/voice-agent-client.js';
 * const session = createSession({ tokenUrl: '/voice-token', agentId: 'agt_...', userId: 'visitor-1' });
 * session.on('transcript', (t) => console.log(t.role, t.text));
 * button.onclick = () => session.start().catch((err) => console.error(err.code, err.message));
 * ```
 */
import { Session, type SessionOptions } from './session.js';

export { Session, type SessionOptions, type TokenRequest, type SessionState, type SessionEvents, type Transcript, type AgentAudio } from './session.js';
export { VoiceAgentError, type StartErrorCode, type SessionErrorCode, type VoiceAgentErrorCode } from './errors.js';
export type * from './messages.js';

/** A session with an agent; nothing happens until `start()`. */
export function createSession(options: SessionOptions): Session {
  return new Session(options);
}
