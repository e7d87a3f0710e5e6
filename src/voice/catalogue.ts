/**
 * The live models, voices and analysis models agents may choose (the contract's `VoiceCatalogue`): the
 * models the Gemini Live adapter knows, or the deployment's `VOICE_MODELS`, with `VOICE_MODEL` as the
 * default; the prebuilt voices of the Live API, each speaking every language the Live API supports;
 * the generateContent models the post-call analysis knows, or `VOICE_ANALYSIS_MODELS`, with
 * `VOICE_ANALYSIS_MODEL` as the default.
 */
import type { components } from '../../generated/openapi.js';

export type VoiceCatalogue = components['schemas']['VoiceCatalogue'];
type Model = VoiceCatalogue['models'][number];
type Supports = Model['supports'];
type AnalysisSupports = VoiceCatalogue['analysis_models'][number]['supports'];

/** What a model takes and gives, by id: the Live API's published capabilities. */
const KNOWN_MODELS: Record<string, Supports> = {
  'gemini-live-2.5-flash-preview': { audio_output: true, text_output: true, image_input: true, tools: true },
  'gemini-2.5-flash-native-audio-preview-09-2025': { audio_output: true, text_output: false, image_input: true, tools: true },
  'gemini-2.0-flash-live-001': { audio_output: true, text_output: true, image_input: true, tools: true },
};

/** A model the adapter does not know is taken to support what the Live protocol offers. */
const ASSUMED: Supports = { audio_output: true, text_output: true, image_input: true, tools: true };

/** What an analysis model offers, by id: the Gemini API's published capabilities (structured output is `responseJsonSchema`). */
const KNOWN_ANALYSIS_MODELS: Record<string, AnalysisSupports> = {
  'gemini-2.5-flash': { structured_output: true, thinking: true },
  'gemini-2.5-pro': { structured_output: true, thinking: true },
  'gemini-2.5-flash-lite': { structured_output: true, thinking: true },
};

/** An analysis model the service does not know is taken to answer as the analysis asks (its answers are checked anyway). */
const ASSUMED_ANALYSIS: AnalysisSupports = { structured_output: true, thinking: false };

/** The languages (BCP 47) the Live API speaks. */
const LANGUAGES = [
  'ar-XA',
  'bn-IN',
  'cmn-CN',
  'de-DE',
  'en-AU',
  'en-GB',
  'en-IN',
  'en-US',
  'es-ES',
  'es-US',
  'fr-CA',
  'fr-FR',
  'gu-IN',
  'hi-IN',
  'id-ID',
  'it-IT',
  'ja-JP',
  'kn-IN',
  'ko-KR',
  'ml-IN',
  'mr-IN',
  'nl-NL',
  'pl-PL',
  'pt-BR',
  'ru-RU',
  'ta-IN',
  'te-IN',
  'th-TH',
  'tr-TR',
  'vi-VN',
];

/** The Live API's prebuilt voices; the service's default is the voice service's own (no voice set). */
const VOICES = ['Aoede', 'Charon', 'Fenrir', 'Kore', 'Leda', 'Orus', 'Puck', 'Zephyr'];

export function voiceCatalogue(config: {
  VOICE_MODEL: string;
  VOICE_MODELS?: string[];
  VOICE_ANALYSIS_MODEL: string;
  VOICE_ANALYSIS_MODELS?: string[];
}): VoiceCatalogue {
  const ids = [...new Set([config.VOICE_MODEL, ...(config.VOICE_MODELS ?? Object.keys(KNOWN_MODELS))])];
  const analysisIds = [...new Set([config.VOICE_ANALYSIS_MODEL, ...(config.VOICE_ANALYSIS_MODELS ?? Object.keys(KNOWN_ANALYSIS_MODELS))])];
  return {
    models: ids.map((id) => ({ id, default: id === config.VOICE_MODEL, supports: KNOWN_MODELS[id] ?? ASSUMED })),
    voices: VOICES.map((id) => ({ id, languages: LANGUAGES })),
    analysis_models: analysisIds.map((id) => ({
      id,
      default: id === config.VOICE_ANALYSIS_MODEL,
      supports: KNOWN_ANALYSIS_MODELS[id] ?? ASSUMED_ANALYSIS,
    })),
  };
}
