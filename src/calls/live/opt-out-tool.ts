/**
 * The built-in `opt_out` tool of phone calls (the agent's `opt_out` setting), as the model sees it:
 * called when the person asks not to be called again. The bridge lists their number on the
 * workspace's do-not-call list and hangs up once the agent's next words (its confirmation and
 * goodbye) have played.
 */
import type { ToolDeclaration } from '../../voice/types.js';

export const OPT_OUT_TOOL = 'opt_out';

export const optOutDeclaration: ToolDeclaration = {
  name: OPT_OUT_TOOL,
  description:
    'Puts the person on the do-not-call list so they are never called again. Use it as soon as the person asks not to be called again, ' +
    'to stop calling, or to be taken off the list. After it returns, confirm in one sentence that they will not be called again and say goodbye; ' +
    'the call then ends.',
  parameters: { type: 'object', properties: {} },
};

/** What the model is told once the number is listed. */
export const OPT_OUT_DONE = 'The number is on the do-not-call list. Confirm to the person that they will not be called again, then say goodbye.';
