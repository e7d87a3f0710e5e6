/**
 * The far end of a simulated call once answered: a person following a script, or an answering machine.
 * Both live on the call's frame clock (see line.ts), so every wait is in simulated time and agent audio
 * is heard exactly as the carrier plays it.
 */
import { FRAME_MS } from './clock.js';
import { BEEP, VOICEMAIL_GREETING, spokenText } from './audio.js';

export type CalleeStep =
  /** Speaks the text (encoded so the sandbox voice service reads it back); done when it has been said. */
  | { say: string }
  /**
   * Until the agent finished a turn: agent audio played since the step began and the playback queue
   * has been empty for 400 ms. Gives up when no agent audio starts within `startWithinMs` (default
   * 5000) or after `maxMs` (default 30000).
   */
  | { waitForAgent: true; startWithinMs?: number; maxMs?: number }
  | { pause: number }
  | { hangup: true }
  /** Barge-in: waits (up to `startWithinMs`, default 5000) for agent audio to play, then talks over it. */
  | { sayWhileAgentSpeaks: string; startWithinMs?: number }
  /** Waits (up to `startWithinMs`) for agent audio to play, then hangs up 200 ms into it. */
  | { hangupWhileAgentSpeaks: true; startWithinMs?: number }
  /** Presses keys one after another (dtmf frames, `gapMs` apart: default 200; 0 presses them all at once, as a flood would). */
  | { pressDigits: string; gapMs?: number }
  /** Plays recorded audio (mu-law 8 kHz, e.g. a speech fixture); `label` notes when it started in the call's record (`clips`). */
  | { play: Buffer; label: string };

export type CalleeScript = CalleeStep[];

/** The person who answers by default (outbound) and who calls by default (inbound `ring()`). */
export const DEFAULT_PERSON: CalleeScript = [
  { waitForAgent: true },
  { say: 'Hello, this is Sam.' },
  { waitForAgent: true },
  { say: 'Can you tell me about my appointment?' },
  { waitForAgent: true },
  { say: 'Thanks, goodbye.' },
  { waitForAgent: true, startWithinMs: 2000 },
  { hangup: true },
];

/** The person at the front desk behind the phone menu (0005), unless the test set a script. */
export const FRONT_DESK: CalleeScript = [
  { waitForAgent: true },
  { say: 'Front desk, this is Sam speaking.' },
  { waitForAgent: true },
  { say: 'Thanks, goodbye.' },
  { waitForAgent: true, startWithinMs: 2000 },
  { hangup: true },
];

/** What the person who does not want calls (0007) says. */
export const OPT_OUT_REQUEST = 'Please do not call me again.';
/** The person who answers a number ending in 0007 (unless the test set a script): asks to be taken off the list. */
export const OPTING_OUT_PERSON: CalleeScript = [
  { waitForAgent: true },
  { say: OPT_OUT_REQUEST },
  { waitForAgent: true },
  { waitForAgent: true, startWithinMs: 2000 },
  { hangup: true },
];

export const MENU_PROMPT = 'Welcome to Acme Dental. To reach the front desk, press 1 then #.';
/** The keys that get through the phone menu. */
export const MENU_KEYS = '1#';
/** How long the menu waits for `#` after its prompt, and how often it asks. */
const MENU_WAIT_MS = 8000;
const MENU_TRIES = 3;

/** The PIN the PIN caller (inbound from a number ending in 0006) types. */
export const PIN = '1234#';
export const PIN_CALLER: CalleeScript = [
  { waitForAgent: true },
  { say: 'I would like to check my account.' },
  { waitForAgent: true },
  { pressDigits: PIN },
  { waitForAgent: true },
  { say: 'Thanks, goodbye.' },
  { waitForAgent: true, startWithinMs: 2000 },
  { hangup: true },
];

/** The agent's turn is over once playback has been idle this long. */
export const TURN_END_MS = 400;
const DEFAULT_START_WITHIN_MS = 5000;
const DEFAULT_WAIT_MAX_MS = 30_000;
const BARGE_IN_DELAY_MS = 100;
const HANGUP_INTO_SPEECH_MS = 200;
const DTMF_GAP_MS = 200;
/** Keys a flood (`gapMs: 0`) sends before it yields to the event loop. */
const DTMF_BURST = 256;
/** The machine stops recording this long after the agent's audio stopped, or after RECORD_MAX_MS. */
const RECORD_TAIL_MS = 1500;
const RECORD_MAX_MS = 30_000;

/** Thrown out of a wait when the call is over; ends the script. */
export class CallOver extends Error {}

/** What a callee can do and observe on its line. */
export interface CalleeLine {
  /** Frames since the line opened. */
  readonly frame: number;
  /** Frames with a media stream up (the service can hear the callee and be heard). */
  readonly streamFrame: number;
  /** Agent audio bytes played in the current frame. */
  readonly agentPlayedNow: number;
  /** The last frame in which agent audio played (-1: none yet). */
  readonly lastAgentFrame: number;
  /** Agent audio is queued for playback. */
  readonly agentPending: boolean;
  /** Every key the service pressed that the callee heard, in order. */
  readonly keysHeard: string;
  /** Resolves once the audio has gone out (20 ms per frame); a label is noted with the time its first frame went out. */
  talk(ulaw: Buffer, label?: string): Promise<void>;
  said(text: string): void;
  dtmf(digit: string): void;
  /** Resolves true when `pred` holds at a frame, false after `maxFrames`; throws CallOver when the call ends. */
  until(pred: () => boolean, maxFrames: number): Promise<boolean>;
  hangup(): void;
}

export const frames = (ms: number) => Math.max(1, Math.ceil(ms / FRAME_MS));

const pause = (line: CalleeLine, ms: number) => line.until(() => false, frames(ms));
const agentPlaying = (line: CalleeLine, startWithinMs = DEFAULT_START_WITHIN_MS) => line.until(() => line.agentPlayedNow > 0, frames(startWithinMs));

async function say(line: CalleeLine, text: string): Promise<void> {
  line.said(text);
  await line.talk(spokenText(text));
}

/**
 * Waits for the agent to speak and finish; no agent audio within `startWithinMs` of the media stream
 * being up: the person goes on anyway. Counted on the stream, not from the answer: how long the service
 * takes to connect its stream (longer on a busy machine) is not time the person could have been heard.
 */
async function waitForAgent(line: CalleeLine, startWithinMs: number, maxMs: number): Promise<void> {
  const start = line.frame;
  const startOnStream = line.streamFrame;
  const turnEnd = frames(TURN_END_MS);
  const startBound = frames(startWithinMs);
  await line.until(() => {
    const heard = line.lastAgentFrame > start;
    if (!heard) return line.streamFrame - startOnStream >= startBound;
    return !line.agentPending && line.frame - line.lastAgentFrame >= turnEnd;
  }, frames(maxMs));
}

/** Runs a person's script; returns when it is done (hung up, or out of steps: the person stays on the line). */
export async function runPerson(line: CalleeLine, script: CalleeScript): Promise<void> {
  for (const step of script) {
    if ('say' in step) await say(line, step.say);
    else if ('waitForAgent' in step) await waitForAgent(line, step.startWithinMs ?? DEFAULT_START_WITHIN_MS, step.maxMs ?? DEFAULT_WAIT_MAX_MS);
    else if ('pause' in step) await pause(line, step.pause);
    else if ('hangup' in step) return line.hangup();
    else if ('sayWhileAgentSpeaks' in step) {
      if (await agentPlaying(line, step.startWithinMs)) await pause(line, BARGE_IN_DELAY_MS);
      await say(line, step.sayWhileAgentSpeaks);
    } else if ('hangupWhileAgentSpeaks' in step) {
      if (await agentPlaying(line, step.startWithinMs)) await pause(line, HANGUP_INTO_SPEECH_MS);
      return line.hangup();
    } else if ('play' in step) {
      await line.talk(step.play, step.label);
    } else if ('pressDigits' in step) {
      const gapMs = step.gapMs ?? DTMF_GAP_MS;
      let pressed = 0;
      for (const digit of step.pressDigits) {
        line.dtmf(digit);
        if (gapMs > 0) await pause(line, gapMs);
        // A flood still leaves the event loop between bursts: the simulator shares a process with the
        // service in the sandbox and the tests, and its own sending must not be what stalls it.
        else if (++pressed % DTMF_BURST === 0) await new Promise((resolve) => setImmediate(resolve));
      }
    }
  }
}

/**
 * A phone menu: once the agent's first words are over it says MENU_PROMPT and waits up to 8 s for
 * keys ending in `#`. MENU_KEYS: it says "Connecting you to the front desk." and `person` takes the
 * line. Other keys, or none: "Sorry, that is not a valid option." and the prompt again; after the
 * third try it says "Goodbye." and hangs up, no person having answered.
 */
export async function runMenu(line: CalleeLine, person: CalleeScript): Promise<void> {
  await waitForAgent(line, DEFAULT_START_WITHIN_MS, DEFAULT_WAIT_MAX_MS);
  let prompt = MENU_PROMPT;
  for (let attempt = 0; attempt < MENU_TRIES; attempt++) {
    const from = line.keysHeard.length;
    await say(line, prompt);
    await line.until(() => line.keysHeard.includes('#', from), frames(MENU_WAIT_MS));
    const end = line.keysHeard.indexOf('#', from);
    const entered = line.keysHeard.slice(from, end < 0 ? undefined : end + 1);
    if (entered === MENU_KEYS) {
      await say(line, 'Connecting you to the front desk.');
      return runPerson(line, person);
    }
    prompt = `Sorry, that is not a valid option. ${MENU_PROMPT}`;
  }
  await say(line, 'Goodbye.');
  line.hangup();
}

/**
 * An answering machine: greeting, beep, then it records what plays until the agent has been quiet for
 * 1.5 s after saying something (or 30 s), and hangs up. `onBeep` fires when the beep has played;
 * `onRecorded` gets the agent audio (bytes) each frame after it.
 */
export async function runVoicemail(line: CalleeLine, onBeep: () => void, onRecorded: (bytes: number) => void): Promise<void> {
  await line.talk(VOICEMAIL_GREETING, 'voicemail-greeting');
  await line.talk(BEEP);
  onBeep();
  let recorded = 0;
  const tail = frames(RECORD_TAIL_MS);
  await line.until(() => {
    if (line.agentPlayedNow > 0) {
      recorded += line.agentPlayedNow;
      onRecorded(line.agentPlayedNow);
    }
    return recorded > 0 && !line.agentPending && line.frame - line.lastAgentFrame >= tail;
  }, frames(RECORD_MAX_MS));
  line.hangup();
}
