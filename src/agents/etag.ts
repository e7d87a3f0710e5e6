/**
 * The agent's `ETag` and `If-Match` (optimistic concurrency on writes). The tag is the pair of its
 * version counters: every write raises `draft_version` and every publish sets `published_version`, and
 * the two together decide everything the resource shows, so equal tags mean equal representations.
 * Hand-written: the comparison is RFC 9110's strong one over a list of tags, a few lines.
 */
import { ApiError } from '../errors/api-error.js';

export function agentETag(v: { draft_version: number; published_version: number }): string {
  return `"${v.draft_version}.${v.published_version}"`;
}

/** 412 `precondition_failed` unless `ifMatch` (when sent) names `current` or is `*`; a weak tag never matches. */
export function checkIfMatch(ifMatch: string | undefined, current: string): void {
  if (ifMatch === undefined) return;
  const tags = ifMatch.split(',').map((t) => t.trim());
  if (tags.includes('*') || tags.includes(current)) return;
  throw new ApiError(
    412,
    'conflict_error',
    'precondition_failed',
    `The agent changed since ${ifMatch.slice(0, 100)} (it is now ${current}); read it again and retry.`,
    {
      param: 'If-Match',
    },
  );
}
