/**
 * The embeddable web widget of the voice agent service. One ES module, served at
 * `/sdk/voice-agent-widget.js`; importing it defines `<voice-agent-widget>`.
 *
 * ```html
 * <script type="module" src="https://voice.example.com/sdk/voice-agent-widget.js"></script>
 * <voice-agent-widget agent-id="agt_..." token-url="/voice-token"></voice-agent-widget>
 * ```
 */
import { VoiceAgentWidget } from './widget.js';

export { VoiceAgentWidget, type PublicAgentProfile, type ProfileStatus } from './widget.js';
export { createSession, VoiceAgentError } from '@voice-agent/client';

if (!customElements.get('voice-agent-widget')) customElements.define('voice-agent-widget', VoiceAgentWidget);

declare global {
  interface HTMLElementTagNameMap {
    'voice-agent-widget': VoiceAgentWidget;
  }
}
