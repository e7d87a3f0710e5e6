/**
 * Splits text into overlapping passages for the full-text index: about `size` characters each, cut at
 * a paragraph, sentence or word boundary where one is near, each starting `overlap` characters before
 * the previous one ended so a fact cut in two is still found whole in one passage.
 */
export interface ChunkOptions {
  size: number;
  overlap: number;
}

export const DEFAULT_CHUNKING: ChunkOptions = { size: 1200, overlap: 200 };

function cutPoint(text: string, start: number, end: number): number {
  if (end >= text.length) return text.length;
  const window = text.slice(start, end);
  const min = Math.floor(window.length * 0.5);
  for (const sep of [/\n\n(?![\s\S]*\n\n)/, /[.!?]\s(?![\s\S]*[.!?]\s)/, /\s(?![\s\S]*\s)/]) {
    const m = sep.exec(window);
    if (m && m.index >= min) return start + m.index + m[0].length;
  }
  return end;
}

export function chunkText(text: string, opts: ChunkOptions = DEFAULT_CHUNKING): string[] {
  const chunks: string[] = [];
  let start = 0;
  while (start < text.length) {
    const end = cutPoint(text, start, start + opts.size);
    const piece = text.slice(start, end).trim();
    if (piece) chunks.push(piece);
    if (end >= text.length) break;
    // Step back by the overlap, then forward to a word start, never behind progress.
    let next = Math.max(end - opts.overlap, start + 1);
    const space = text.indexOf(' ', next);
    if (space !== -1 && space < end) next = space + 1;
    start = next;
  }
  return chunks;
}
