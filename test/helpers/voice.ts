/** Voice-service test steps: a recorder of a voice session's events that waits for the ones a test expects. */
import type { VoiceEvent, VoiceSession } from '../../src/voice/types.js';
import { patient } from './patience.js';

/** Records a session's events and waits for the ones a test expects. */
export class Recorder {
  events: VoiceEvent[] = [];
  private waiters: Array<() => void> = [];
  constructor(session: VoiceSession) {
    session.onEvent((e) => {
      this.events.push(e);
      for (const w of this.waiters.splice(0)) w();
    });
  }

  /** Resolves with the first event from index `from` matching `pred`. */
  async next<T extends VoiceEvent['type']>(
    type: T,
    pred: (e: Extract<VoiceEvent, { type: T }>) => boolean = () => true,
    from = 0,
    timeoutMs = 8000,
  ): Promise<Extract<VoiceEvent, { type: T }>> {
    const deadline = Date.now() + patient(timeoutMs);
    for (;;) {
      const found = this.events.slice(from).find((e): e is Extract<VoiceEvent, { type: T }> => e.type === type && pred(e as Extract<VoiceEvent, { type: T }>));
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${type} event; saw: ${this.events.map((e) => e.type).join(',')}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  /** The agent's transcript of the turn that completes next after index `from`. */
  async agentTurn(from: number): Promise<string> {
    const done = await this.next('turn_complete', () => true, from);
    const upTo = this.events.indexOf(done);
    const transcripts = this.events.slice(from, upTo).filter((e) => e.type === 'output_transcript' || e.type === 'text');
    if (transcripts.length === 0) return '';
    const last = transcripts[transcripts.length - 1];
    return last.type === 'output_transcript' ? last.text : transcripts.map((e) => (e.type === 'text' ? e.text : '')).join('');
  }
}
