/** The request's id: the client's X-Request-Id when it is 1-128 URL-safe characters, otherwise a new one (front-door.ts echoes it). */
import { newId } from '../lib/ids.js';

const VALID = /^[A-Za-z0-9._~-]{1,128}$/;

export function requestIdFor(given: string): string {
  return VALID.test(given) ? given : newId('request');
}
