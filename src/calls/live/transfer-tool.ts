/**
 * The built-in `transfer_call` tool as the model sees it: one declaration listing the agent's transfer
 * destinations (each with its description), and the destination a call of it chose.
 */
import type { ToolDeclaration } from '../../voice/types.js';
import type { PhoneTransferDestination } from '../../agents/store.js';

export const TRANSFER_TOOL = 'transfer_call';

const REASON = { type: 'string', description: 'Why the call is transferred, in a few words.' };
const TELL_FIRST = 'Tell the caller you are transferring them first.';

/** The declaration for an agent's destinations (at least one); the agent's only `default` keeps the one-number form. */
export function transferDeclaration(destinations: PhoneTransferDestination[]): ToolDeclaration {
  if (destinations.length === 1 && destinations[0].name === 'default') {
    return {
      name: TRANSFER_TOOL,
      description: `Transfers the call to a person. Use it when: ${destinations[0].description} ${TELL_FIRST}`,
      parameters: { type: 'object', properties: { reason: REASON } },
    };
  }
  const listed = destinations.map((d) => `- ${d.name}: ${d.description}`).join('\n');
  return {
    name: TRANSFER_TOOL,
    description: `Transfers the call to a person at one of these destinations; choose the one that fits:\n${listed}\n${TELL_FIRST}`,
    parameters: {
      type: 'object',
      properties: {
        destination: { type: 'string', enum: destinations.map((d) => d.name), description: 'The name of the destination.' },
        reason: REASON,
      },
      required: ['destination'],
    },
  };
}

/** The destination a call of the tool names; the only one when it names none; else why none. */
export function chosenDestination(
  destinations: PhoneTransferDestination[],
  args: Record<string, unknown>,
): { destination: PhoneTransferDestination } | { error: string } {
  const named = typeof args.destination === 'string' ? args.destination : undefined;
  if (named === undefined && destinations.length === 1) return { destination: destinations[0] };
  const found = destinations.find((d) => d.name === named);
  if (found) return { destination: found };
  return { error: `Choose a destination by name, one of: ${destinations.map((d) => d.name).join(', ')}.` };
}
