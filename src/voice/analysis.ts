/**
 * Post-call analysis: summary, sentiment, goal_met, needs_review, unanswered_questions.
 *
 * The Live protocol has no one-shot text request, so the analysis asks the voice service's host for a
 * REST `models/{VOICE_ANALYSIS_MODEL}:generateContent` (JSON output), at the http(s) origin of
 * VOICE_SERVICE_URL, with GEMINI_API_KEY as `x-goog-api-key`. The sandbox voice service answers that
 * request with the deterministic analyzer below. When the model's answer cannot be had or does not parse,
 * the deterministic analysis is used and the conversation is flagged needs_review.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { ConversationAnalysis, TranscriptTurn } from './types.js';

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

export function analysisPrompt(instruction: string, transcript: TranscriptTurn[]): string {
  return [
    'Analyse this finished conversation between a voice agent (role "model") and a person (role "user").',
    'Answer with one JSON object: {"summary": string (2-3 sentences), "sentiment": "positive"|"neutral"|"negative"',
    '(the person\'s), "goal_met": boolean (did the agent achieve what its instruction asks), "needs_review": boolean',
    '(should a human look at it), "unanswered_questions": string[] (questions of the person left unanswered)}.',
    INSTRUCTION_MARKER,
    JSON.stringify(instruction),
    TRANSCRIPT_MARKER,
    JSON.stringify(transcript.map((t) => ({ role: t.role, text: t.text }))),
  ].join('\n');
}

/** The transcript and instruction back out of an analysisPrompt (the sandbox's side). */
export function parseAnalysisPrompt(prompt: string): { instruction: string; transcript: TranscriptTurn[] } | null {
  const lines = prompt.split('\n');
  const at = (marker: string) => lines.indexOf(marker);
  const t = at(TRANSCRIPT_MARKER);
  const ins = at(INSTRUCTION_MARKER);
  if (t < 0 || ins < 0) return null;
  try {
    const turns = z.array(z.object({ role: z.enum(['model', 'user']), text: z.string() })).parse(JSON.parse(lines[t + 1] ?? ''));
    return { instruction: z.string().parse(JSON.parse(lines[ins + 1] ?? '')), transcript: turns.map((x) => ({ ...x, timestamp: 0 })) };
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

/** The http(s) origin serving generateContent next to a ws(s) Live endpoint. */
export function restOrigin(liveUrl: string): string {
  const url = new URL(liveUrl);
  url.protocol = url.protocol === 'wss:' ? 'https:' : 'http:';
  return url.origin;
}

export async function analyzeWithModel(
  opts: { origin: string; apiKey?: string; model: string; timeoutMs: number; log: Logger },
  input: { instruction: string; transcript: TranscriptTurn[] },
): Promise<ConversationAnalysis> {
  const model = opts.model.startsWith('models/') ? opts.model : `models/${opts.model}`;
  try {
    const res = await fetch(`${opts.origin}/v1beta/${model}:generateContent`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(opts.apiKey ? { 'x-goog-api-key': opts.apiKey } : {}) },
      body: JSON.stringify({
        contents: [{ role: 'user', parts: [{ text: analysisPrompt(input.instruction, input.transcript) }] }],
        generationConfig: { responseMimeType: 'application/json', temperature: 0 },
      }),
      signal: AbortSignal.timeout(opts.timeoutMs),
    });
    if (!res.ok) throw new Error(`generateContent answered ${res.status}`);
    const body = (await res.json()) as { candidates?: Array<{ content?: { parts?: Array<{ text?: string }> } }> };
    const text = (body.candidates?.[0]?.content?.parts ?? []).map((p) => p.text ?? '').join('');
    return analysisSchema.parse(JSON.parse(text));
  } catch (err) {
    opts.log.warn({ err: (err as Error).message }, 'post-call analysis by the model failed; using the transcript analyzer');
    return { ...analyzeTranscript(input.transcript), needs_review: true };
  }
}
