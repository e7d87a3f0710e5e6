/**
 * The part of a WebSocket a call's media stream is used through (ws's WebSocket is one). A carrier
 * whose media does not arrive over a WebSocket (RTP from the SIP user agent) hands the media server
 * an object of its own with this shape, speaking its dialect's frames.
 */
export interface MediaSocket {
  readonly readyState: number;
  readonly OPEN: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  terminate(): void;
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
  on(event: 'close', listener: () => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  once(event: 'close', listener: () => void): this;
  off(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): this;
  /**
   * An in-process stream whose caller audio is mu-law already (RTP) may take this: once a listener is
   * set, each frame of caller audio goes to it as it is instead of as a `media` frame (no base64, JSON
   * or parse between two parts of one process); every other frame still comes as a `message`.
   */
  onCallerAudio?(listener: (ulaw: Buffer) => void): void;
  /**
   * The other way: such a stream takes the agent's audio (mu-law, whole frames the caller keeps and
   * never writes to) as it is, in place of a `media` frame it would parse back.
   */
  sendAgentAudio?(ulaw: Buffer): void;
}
