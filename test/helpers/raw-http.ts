/** Reading an HTTP/1.1 answer received on a raw socket (tests that speak HTTP by hand). */

export interface RawAnswer {
  status: number;
  requestId: string | undefined;
  /** The JSON body; null when the body is empty or not JSON. */
  body: { error?: Record<string, unknown> } | null;
}

export function readRawAnswer(answer: string): RawAnswer {
  const end = answer.indexOf('\r\n\r\n');
  const head = end < 0 ? answer : answer.slice(0, end);
  let body = null;
  try {
    body = end < 0 ? null : JSON.parse(answer.slice(end + 4));
  } catch {
    // Not JSON: the caller reports the whole answer.
  }
  return { status: Number(head.split(' ')[1]), requestId: /\r\nX-Request-Id: (\S+)/i.exec(head)?.[1], body };
}
