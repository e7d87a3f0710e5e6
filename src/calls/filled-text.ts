/**
 * The texts a phone call of an agent is given, filled with the call's variables: its instruction, its
 * first message and its voicemail message, each read once per agent (a batch's recipients share
 * them) and held to its field's cap (src/contract/placeholders.ts).
 */
import { ApiError } from '../errors/api-error.js';
import type { RuntimeAgent } from '../agents/service.js';
import {
  conversationVariables,
  fillOverflow,
  filledFieldCaps,
  missingMessage,
  missingVariable,
  overflowMessage,
  Template,
  type FillOverflow,
  type MissingVariable,
  type Variables,
} from '../contract/placeholders.js';

export class CallTexts {
  private readonly instruction: Template;
  private readonly firstMessage: Template | null;
  private readonly voicemail: Template | null;

  constructor(private readonly agent: RuntimeAgent) {
    this.instruction = new Template(agent.instruction);
    this.firstMessage = agent.firstMessage ? new Template(agent.firstMessage) : null;
    const vm = agent.voicemailConfig;
    this.voicemail = vm?.enabled && vm.message ? new Template(vm.message) : null;
  }

  /** The call's own first message when it has one (`null`: none at all), else the agent's. */
  private firstMessageOf(own: string | null | undefined): Template | null {
    return own === undefined ? this.firstMessage : own ? new Template(own) : null;
  }

  private templates(ownFirstMessage: string | null | undefined) {
    return { instruction: this.instruction, first_message: this.firstMessageOf(ownFirstMessage), 'voicemail_config.message': this.voicemail };
  }

  /** The first text a call with these variables and first message would fill past its cap, or null. */
  overflow(given: Variables | null | undefined, ownFirstMessage?: string | null): FillOverflow | null {
    return fillOverflow(this.templates(ownFirstMessage), this.agent.variablePlaceholders, given);
  }

  /** The first placeholder a call with these variables and first message would leave without a value, or null. */
  missing(given: Variables | null | undefined, ownFirstMessage?: string | null): MissingVariable | null {
    return missingVariable(this.templates(ownFirstMessage), this.agent.variablePlaceholders, given);
  }

  /** The call's instruction and first message, filled (never past their caps); a first message filled to nothing is none. */
  filled(given: Variables | null | undefined, ownFirstMessage?: string | null): { instruction: string; first_message: string | null } {
    const values = conversationVariables(this.agent.variablePlaceholders, given);
    const caps = filledFieldCaps();
    return {
      instruction: this.instruction.fill(values, caps.instruction),
      first_message: this.firstMessageOf(ownFirstMessage)?.fill(values, caps.first_message) || null,
    };
  }
}

/** Where in a request an overflow is blamed: the variable when the request gave it, else its first message, else the agent. */
export function overflowParam(o: FillOverflow, given: Variables | null | undefined, prefix = ''): string {
  if (given && Object.prototype.hasOwnProperty.call(given, o.variable)) return `${prefix}variables.${o.variable}`;
  return o.field === 'first_message' ? `${prefix}first_message` : 'agent_id';
}

/** 422 `variable_missing` for a call that leaves a placeholder without a value; `param` is where the value would go. */
export function missingError(m: MissingVariable): ApiError<422> {
  return new ApiError(422, 'invalid_request_error', 'variable_missing', missingMessage(m), { param: `variables.${m.variable}` });
}

/** 422 `filled_text_too_long` for a call whose variables would fill a text past its cap. */
export function overflowError(o: FillOverflow, given: Variables | null | undefined): ApiError<422> {
  return new ApiError(422, 'invalid_request_error', 'filled_text_too_long', overflowMessage(o), { param: overflowParam(o, given) });
}
