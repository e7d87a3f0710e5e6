/**
 * A conversation's redaction applied to its recording (the `recordings` target): the transport tells
 * it what the engine reports (agent audio about to be recorded, final transcripts, the person's keys,
 * an interruption) and it decides each span of the recording's redaction gate
 * (src/recordings/redaction-gate.ts) by whether the words said in it have anything to redact.
 */
import type { Redactor } from '../redaction/redactor.js';
import type { RedactionGate } from '../recordings/redaction-gate.js';
import type { TranscriptTurn } from '../voice/types.js';
import type { TranscriptUpdate } from './engine.js';

/** A recorder with a redaction gate and its timeline's marks. */
export interface MarkedRecorder {
  readonly gate: RedactionGate | null;
  personMark(): number;
  agentMark(): number;
}

export class RecordingRedaction {
  private constructor(
    private readonly redactor: Redactor,
    private readonly recorder: MarkedRecorder,
    private readonly gate: RedactionGate,
  ) {}

  /** For a recorder behind a gate when the redactor covers recordings; null otherwise. */
  static of(redactor: Redactor | null, recorder: MarkedRecorder | null): RecordingRedaction | null {
    if (!redactor?.covers('recordings') || !recorder?.gate) return null;
    return new RecordingRedaction(redactor, recorder, recorder.gate);
  }

  /** Before agent audio goes to the recorder: its utterance's span starts where it will play. */
  agentAudio(): void {
    this.gate.agentStarts(this.recorder.agentMark());
  }

  /** A transcript update: a final one decides its speaker's span. */
  transcript(u: TranscriptUpdate): void {
    if (!u.final) return;
    const redact = this.redactor.finds(u.text);
    if (u.role === 'user') this.gate.person(this.recorder.personMark(), redact);
    else this.gate.agentEnds(this.recorder.agentMark(), redact);
  }

  /** A transcript entry of keys the person pressed: their tones are in the person's span. */
  committed(turn: TranscriptTurn): void {
    if (turn.dtmf && turn.role === 'user') this.gate.person(this.recorder.personMark(), this.redactor.finds(turn.dtmf));
  }

  /** After the recorder dropped the agent audio not yet played. */
  interrupted(): void {
    this.gate.agentCut(this.recorder.agentMark());
  }
}
