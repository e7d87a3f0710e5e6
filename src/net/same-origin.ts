/**
 * Whether two URLs share scheme, host and port. Secrets stored for an outbound destination (tool
 * headers, MCP credentials, OAuth tokens and client secret) are bound to its origin: when a user moves
 * the destination to another origin, the secrets are dropped unless the same request sends them again.
 */
export function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}
