/**
 * How long a test waits for what must happen. A deadline in a test only bounds a failure: on a busy
 * machine (two busy loops holding both cores, issue 37) what takes one second quiet can take ten, so
 * every wait helper stretches the deadline it is given by PATIENCE (`TEST_PATIENCE`, default 4). A
 * test never shows that something does NOT happen by waiting out a deadline: it asserts an order of
 * events instead.
 */
export const PATIENCE = Number(process.env.TEST_PATIENCE ?? 4);

/** A wait helper's deadline for a wait of `ms` on a quiet machine. */
export function patient(ms: number): number {
  return ms * PATIENCE;
}
