/** What the widget says in its live region: readable text for the client library's error codes. */

const DEVICE: Record<string, string> = { voice: 'microphone', text: 'microphone', camera: 'camera or microphone', screen: 'screen or microphone' };

export function describeError(code: string | undefined, source: string): string {
  switch (code) {
    case 'mint_failed':
      return 'The conversation could not be set up by this site. Please try again later.';
    case 'invalid_token':
      return 'The conversation could not be authorised. Please try again.';
    case 'rate_limited':
      return 'All agents are busy right now. Please try again in a moment.';
    case 'limit_reached':
      return 'No conversation time is left on this service right now.';
    case 'billing_blocked':
      return 'This service is not available at the moment.';
    case 'source_not_enabled':
      return source === 'screen' ? 'Screen sharing is not available for this agent.' : 'The camera is not available for this agent.';
    case 'model_refused':
      return 'This agent is not available right now.';
    case 'permission_denied':
      return `Access to the ${DEVICE[source] ?? 'microphone'} was refused. Allow it in your browser to talk to the agent.`;
    case 'media_unavailable':
      return `No usable ${DEVICE[source] ?? 'microphone'} was found.`;
    case 'aborted':
      return 'The conversation was cancelled.';
    case 'connection_lost':
      return 'The connection to the agent was lost.';
    case 'media_ended':
      return source === 'screen' ? 'Screen sharing stopped.' : source === 'camera' ? 'The camera stopped.' : 'The microphone stopped.';
    case 'no_audio_received':
      return 'The agent hears nothing: is your microphone muted?';
    case 'forward_failed':
      return 'Your last message did not reach the agent. Please send it again.';
    case 'upstream_unavailable':
      return 'The agent is unavailable; the conversation ends.';
    case 'not_live':
      return 'The conversation is not running.';
    default:
      return 'The agent could not be reached. Please try again.';
  }
}
