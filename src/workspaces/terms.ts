/** The terms of a conversation's billing, shared by admission, its store and the reservations. */

export type UsageKind = 'web_session' | 'phone_call';

/** What a conversation kind reserves: its per-minute price, how long its reservation lives, its longest length. */
export interface ReservationTerms {
  kind: UsageKind;
  centsPerMinute: number;
  expiryMs: number;
  /** The conversation's own maximum length in minutes (phone calls); no reservation grows beyond it. */
  maxMinutes?: number;
}
