/**
 * Post-call analysis: summary, sentiment, goal_met, needs_review, unanswered_questions, and, when the
 * agent asks for them, structured `data` following its JSON Schema and a `success` judgement against its
 * criteria, all in one request.
 *
 * The Live protocol has no one-shot text request, so the analysis asks the voice service's host for a
 * REST `models/{model}:generateContent` (the agent's `analysis_model`, else VOICE_ANALYSIS_MODEL) at the http(s) origin of VOICE_SERVICE_URL, with
 * GEMINI_API_KEY as `x-goog-api-key`, using the API's structured output: `generationConfig.
 * responseMimeType: application/json` with `responseJsonSchema`, the schema of the whole answer (the
 * fixed fields, the agent's data schema under `data` as structured-output.ts reduces it, `success`).
 * The sandbox voice service answers that request with the deterministic analyzer below and the fixed
 * extraction rules of src/sandbox/voice/extraction.ts. When the fixed fields cannot be had or do not
 * parse, the deterministic analysis is used and the conversation is flagged needs_review; `data` and
 * `success` are then reported as failed (the write-up makes them null with the reason), never guessed.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import { forStructuredOutput } from './structured-output.js';
import type { AnalysisAnswer, AnalysisRequest, AnswerPart, ConversationAnalysis, TranscriptTurn } from './types.js';

const POSITIVE = new Set([
  'thanks',
  'thank',
  'great',
  'good',
  'perfect',
  'excellent',
  'happy',
  'love',
  'wonderful',
  'helpful',
  'awesome',
  'appreciate',
  'nice',
  'glad',
  'brilliant',
  'fantastic',
]);
const NEGATIVE = new Set([
  'bad',
  'terrible',
  'awful',
  'angry',
  'frustrated',
  'upset',
  'hate',
  'useless',
  'problem',
  'complaint',
  'wrong',
  'disappointed',
  'annoyed',
  'worst',
  'horrible',
  'ridiculous',
  'unacceptable',
  'broken',
  'frustrating',
  'annoying',
  'disappointing',
  'problems',
  'complaints',
  'complain',
  'rude',
]);
const NON_ANSWER = /\b(i don't know|i do not know|not sure|can't help|cannot help|unable to|no idea)\b/i;
const QUESTION_START = /^(who|what|when|where|why|how|which|can|could|would|will|is|are|do|does|did)\b/i;

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n - 3)}...` : s);

function questionsIn(text: string): string[] {
  return (text.match(/[^.!?]*[.!?]?/g) ?? [])
    .map((s) => s.trim())
    .filter((s) => s.endsWith('?') || (QUESTION_START.test(s) && !/[.!]$/.test(s) && s.split(/\s+/).length >= 3));
}

/**
 * Deterministic analysis of a transcript:
 * - summary: turn counts, the user's first words and the agent's last words;
 * - sentiment: user words in a positive and a negative lexicon (more positive -> positive, more negative ->
 *   negative, else neutral);
 * - unanswered_questions: questions in a user turn (ending in "?", or starting with a question word) that no
 *   agent turn follows before the next user turn, or whose following agent turn is a non-answer
 *   ("I don't know", "not sure", "unable to", ...);
 * - goal_met: the user spoke, the agent answered every question and the sentiment is not negative;
 * - needs_review: negative sentiment, an unanswered question, or a conversation where the user never spoke.
 */
export function analyzeTranscript(transcript: TranscriptTurn[]): ConversationAnalysis {
  const user = transcript.filter((t) => t.role === 'user' && t.text.trim());
  const model = transcript.filter((t) => t.role === 'model' && t.text.trim());

  let score = 0;
  for (const turn of user) {
    for (const word of turn.text.toLowerCase().match(/[a-z']+/g) ?? []) {
      if (POSITIVE.has(word)) score++;
      if (NEGATIVE.has(word)) score--;
    }
  }
  const sentiment = score > 0 ? 'positive' : score < 0 ? 'negative' : 'neutral';

  const unanswered: string[] = [];
  transcript.forEach((turn, i) => {
    if (turn.role !== 'user') return;
    const questions = questionsIn(turn.text);
    if (questions.length === 0) return;
    const next = transcript.slice(i + 1).find((t) => t.text.trim());
    if (!next || next.role === 'user' || NON_ANSWER.test(next.text)) unanswered.push(...questions);
  });

  let summary: string;
  if (transcript.length === 0) summary = 'No conversation took place.';
  else {
    const parts = [`Conversation of ${user.length} user and ${model.length} agent turns.`];
    if (user.length > 0) parts.push(`The user opened with "${clip(user[0].text.trim(), 120)}".`);
    if (model.length > 0) parts.push(`The agent last said "${clip(model[model.length - 1].text.trim(), 120)}".`);
    summary = parts.join(' ');
  }

  const goal_met = user.length > 0 && unanswered.length === 0 && sentiment !== 'negative';
  return {
    summary,
    sentiment,
    goal_met,
    needs_review: sentiment === 'negative' || unanswered.length > 0 || user.length === 0,
    unanswered_questions: unanswered,
  };
}

export const TRANSCRIPT_MARKER = 'TRANSCRIPT (JSON, one line):';
export const INSTRUCTION_MARKER = 'AGENT INSTRUCTION (JSON string, one line):';
export const SUCCESS_MARKER = 'SUCCESS CRITERIA (JSON string, one line):';

export function analysisPrompt(input: AnalysisRequest): string {
  const lines = [
    'Analyse this finished conversation between a voice agent (role "model") and a person (role "user").',
    'Answer with one JSON object: {"summary": string (2-3 sentences), "sentiment": "positive"|"neutral"|"negative"',
    '(the person\'s), "goal_met": boolean (did the agent achieve what its instruction asks), "needs_review": boolean',
    '(should a human look at it), "unanswered_questions": string[] (questions of the person left unanswered)}.',
  ];
  if (input.dataSchema) {
    lines.push(
      'Also answer "data": the facts its schema asks for, taken only from what was said in the conversation. Leave out',
      'a fact nobody stated (or give null where the schema allows it); never guess or invent one.',
    );
  }
  if (input.successCriteria) {
    lines.push('Also answer "success": {"met": boolean, "reason": string (one or two sentences)}: whether the conversation met the success criteria below.');
  }
  lines.push(INSTRUCTION_MARKER, JSON.stringify(input.instruction));
  if (input.successCriteria) lines.push(SUCCESS_MARKER, JSON.stringify(input.successCriteria));
  lines.push(TRANSCRIPT_MARKER, JSON.stringify(input.transcript.map((t) => ({ role: t.role, text: t.text }))));
  return lines.join('\n');
}

/** The transcript, instruction and success criteria back out of an analysisPrompt (the sandbox's side). */
export function parseAnalysisPrompt(prompt: string): { instruction: string; transcript: TranscriptTurn[]; successCriteria: string | null } | null {
  const lines = prompt.split('\n');
  const at = (marker: string) => lines.indexOf(marker);
  const t = at(TRANSCRIPT_MARKER);
  const ins = at(INSTRUCTION_MARKER);
  const sc = at(SUCCESS_MARKER);
  if (t < 0 || ins < 0) return null;
  try {
    const turns = z.array(z.object({ role: z.enum(['model', 'user']), text: z.string() })).parse(JSON.parse(lines[t + 1] ?? ''));
    return {
      instruction: z.string().parse(JSON.parse(lines[ins + 1] ?? '')),
      transcript: turns.map((x) => ({ ...x, timestamp: 0 })),
      successCriteria: sc < 0 ? null : z.string().parse(JSON.parse(lines[sc + 1] ?? '')),
    };
  } catch {
    return null;
  }
}

const analysisSchema = z.object({
  summary: z.string(),
  sentiment: z.enum(['positive', 'neutral', 'negative']),
  goal_met: z.boolean(),
  needs_review: z.boolean(),
  unanswered_questions: z.array(z.string()),
});

/** Where the agent's data schema sits in the answer's schema (its local `$ref`s are rebased there). */
export const DATA_SCHEMA_BASE = '#/properties/data';

/** `generationConfig.responseJsonSchema`: the schema of the whole answer. */
export function analysisResponseSchema(input: AnalysisRequest): Record<string, unknown> {
  const properties: Record<string, unknown> = {
    summary: { type: 'string', description: 'Two or three sentences on what happened.' },
    sentiment: { type: 'string', enum: ['positive', 'neutral', 'negative'], description: "The person's overall sentiment." },
    goal_met: { type: 'boolean', description: 'Whether the agent achieved what its instruction asks.' },
    needs_review: { type: 'boolean', description: 'Whether a human should look at the conversation.' },
    unanswered_questions: { type: 'array', items: { type: 'string' }, description: "The person's questions left unanswered." },
  };
  if (input.dataSchema) properties.data = forStructuredOutput(input.dataSchema, DATA_SCHEMA_BASE);
  if (input.successCriteria) {
    properties.success = {
      type: 'object',
      properties: {
        met: { type: 'boolean', description: 'Whether the conversation met the success criteria.' },
        reason: { type: 'string', description: 'Why, in one or two sentences.' },
      },
      required: ['met', 'reason'],
      propertyOrdering: ['met', 'reason'],
    };
  }
  const names = Object.keys(properties);
  return { type: 'object', properties, required: names, propertyOrdering: names };
}

/** The http(s) origin serving generateContent next to a ws(s) Live endpoint. */
export function restOrigin(liveUrl: string): string {
  const url = new URL(liveUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  return url.origin;
}

interface GenerateContentResponse {
  candidates?: Array<{ content?: { parts?: Array<{ text?: string; thought?: boolean }> }; finishReason?: string }>;
  promptFeedback?: { blockReason?: string };
}

/** The answer's JSON text, or why the model gave none (blocked, cut short, no candidate). */
function answerText(body: GenerateContentResponse): { text: string } | { failed: string } {
  const candidate = body.candidates?.[0];
  if (!candidate) return { failed: `the model gave no answer${body.promptFeedback?.blockReason ? ` (blocked: ${body.promptFeedback.blockReason})` : ''}` };
  const text = (candidate.content?.parts ?? [])
    .filter((p) => !p.thought)
    .map((p) => p.text ?? '')
    .join('');
  if (candidate.finishReason && !['STOP', 'FINISH_REASON_UNSPECIFIED'].includes(candidate.finishReason) && !text) {
    return { failed: `the model stopped without an answer (${candidate.finishReason})` };
  }
  return { text };
}

const MESSAGE_MAX = 1000;
const clipMessage = (m: string) => (m.length > MESSAGE_MAX ? `${m.slice(0, MESSAGE_MAX - 3)}...` : m);

export async function analyzeWithModel(
  opts: { origin: string; apiKey?: string; model: string; timeoutMs: number; log: Logger },
  input: AnalysisRequest,
): Promise<AnalysisAnswer> {
  const model = opts.model.startsWith('models/') ? opts.model : `models/${opts.model}`;
  const asked = { data: Boolean(input.dataSchema), success: Boolean(input.successCriteria) };
  /** The fixed analysis from the transcript (flagged for review), and the asked-for parts failed alike. */
  const fallback = (part: AnswerPart & { ok: false }): AnalysisAnswer => ({
    ...analyzeTranscript(input.transcript),
    needs_review: true,
    ...(asked.data ? { data: part } : {}),
    ...(asked.success ? { success: part } : {}),
  });
  let body: GenerateContentResponse;
  try {
    const res = await fetch(`${opts.origin}/v1beta/${model}:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(opts.apiKey ? { 'x-goog-api-key': opts.apiKey } : {}) },
      body: JSON.stringify({
        contents: [{ role: 'user', parts: [{ text: analysisPrompt(input) }] }],
        generationConfig: { responseMimeType: 'application/json', responseJsonSchema: analysisResponseSchema(input), temperature: 0 },
      }),
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    if (!res.ok) throw new Error(`generateContent answered ${res.status}`);
    body = (await res.json()) as GenerateContentResponse;
  } catch (err) {
    const message = (err as Error).name === 'TimeoutError' ? `the analysis model did not answer within ${opts.timeoutMs / 1000} s` : (err as Error).message;
    opts.log.warn({ err: message }, 'post-call analysis by the model failed; using the transcript analyzer');
    return fallback({ ok: false, code: 'analysis_failed', message: clipMessage(message) });
  }
  const answer = answerText(body);
  if ('failed' in answer) {
    opts.log.warn({ err: answer.failed }, 'post-call analysis by the model failed; using the transcript analyzer');
    return fallback({ ok: false, code: 'analysis_failed', message: answer.failed });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    opts.log.warn('the analysis model did not answer JSON; using the transcript analyzer');
    return fallback({ ok: false, code: 'invalid_output', message: "the model's answer is not JSON" });
  }
  const obj = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  if (!obj) return fallback({ ok: false, code: 'invalid_output', message: "the model's answer is not a JSON object" });
  const part = (name: string): AnswerPart =>
    name in obj ? { ok: true, value: obj[name] } : { ok: false, code: 'invalid_output', message: `the model's answer has no "${name}"` };
  const fixed = analysisSchema.safeParse(obj);
  if (!fixed.success) opts.log.warn({ err: fixed.error.issues[0]?.message }, "the analysis model's fixed fields do not parse; using the transcript analyzer");
  return {
    ...(fixed.success ? fixed.data : { ...analyzeTranscript(input.transcript), needs_review: true }),
    ...(asked.data ? { data: part('data') } : {}),
    ...(asked.success ? { success: part('success') } : {}),
  };
}
