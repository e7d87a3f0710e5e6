/**
 * The keys a person presses on a call, gathered into runs: one run is one input to the model and one
 * transcript entry. A run ends at `#`, at MAX_RUN_KEYS keys, or after `gapMs` without a key (the
 * CALL_DTMF_GAP_MS setting). Anything but a keypad key (`0`-`9`, `*`, `#`, `A`-`D`) is ignored.
 */
const KEYS = '0123456789*#ABCD';
export const MAX_RUN_KEYS = 64;

export class KeypadRuns {
  private keys = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly gapMs: number,
    private readonly onRun: (keys: string) => void,
  ) {}

  press(key: string): void {
    if (key.length !== 1 || !KEYS.includes(key)) return;
    this.keys += key;
    clearTimeout(this.timer);
    if (key === '#' || this.keys.length >= MAX_RUN_KEYS) this.flush();
    else this.timer = setTimeout(() => this.flush(), this.gapMs);
  }

  /** Ends the run now (the call is ending): its keys are handed over if there are any. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const keys = this.keys;
    this.keys = '';
    if (keys) this.onRun(keys);
  }
}
