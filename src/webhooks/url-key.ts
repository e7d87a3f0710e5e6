/**
 * The identity of a webhook target: the URL as WHATWG URL parsing normalises it (scheme and host
 * lower-cased, default port dropped, an empty path written `/`). Two URLs with the same key are one
 * target. A string that does not parse is its own key (its delivery fails at the guard).
 */
export function urlKey(raw: string): string {
  try {
    return new URL(raw).href;
  } catch {
    return raw;
  }
}
