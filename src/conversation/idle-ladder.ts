/**
 * The idle ladder of a conversation (its `conversation.idle` settings): after `idle_ms` in which
 * neither side spoke the agent says the next reminder, at most `max_reminders` in a row; after another
 * `idle_ms` it gives up (the transport says the goodbye and ends the conversation). The person
 * speaking starts the count again; anything either side does restarts the wait. A phone call without
 * settings gets the deployment's silence timeout as a ladder with no reminders and no goodbye.
 */
import type { IdleSettings } from '../voice/conversation-settings.js';

export interface IdleActions {
  remind(text: string, count: number): void;
  giveUp(goodbye: string | null, count: number): void;
}

export class IdleLadder {
  private lastActivity: number;
  private reminded = 0;
  private over = false;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly settings: IdleSettings,
    private readonly now: () => number,
    private readonly actions: IdleActions,
  ) {
    this.lastActivity = now();
  }

  /** Something was said or done; `byPerson`: the person spoke (the reminders count again from zero). */
  activity(byPerson = false): void {
    this.lastActivity = this.now();
    if (byPerson) this.reminded = 0;
  }

  start(): void {
    if (this.timer || this.over) return;
    const every = Math.max(50, Math.min(1000, Math.floor(this.settings.idle_ms / 4)));
    this.timer = setInterval(() => this.check(), every);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private check(): void {
    if (this.over || this.now() - this.lastActivity < this.settings.idle_ms) return;
    this.lastActivity = this.now();
    const { reminders, max_reminders: max } = this.settings;
    if (this.reminded < max && reminders.length) {
      const text = reminders[this.reminded % reminders.length];
      this.reminded += 1;
      this.actions.remind(text, this.reminded);
      return;
    }
    this.over = true;
    this.stop();
    this.actions.giveUp(this.settings.goodbye_message, this.reminded);
  }
}
