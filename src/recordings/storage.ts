/**
 * Where a recording's audio lives: one interface, two backends. A recording is stored as chunks of
 * about a second, in order; their index (sequence, offset, size) is always a row in PostgreSQL, written
 * in the transaction that advances the recording's size, so what a reader or a crash sees is always a
 * whole prefix. The backend keeps the chunk's bytes: `postgres` inline in that index row (nothing more
 * to run), `s3` as one object per chunk in an S3-compatible bucket (s3-storage.ts).
 */
export interface ChunkKey {
  workspaceId: string;
  recordingId: string;
  seq: number;
}

export interface RecordingStorage {
  readonly kind: 'postgres' | 's3';
  /** Keeps a chunk's bytes; returns what the index row holds inline (the bytes, or null when kept elsewhere). */
  put(key: ChunkKey, data: Buffer): Promise<Buffer | null>;
  /** A chunk's bytes, given what its index row holds inline. */
  get(key: ChunkKey, inline: Buffer | null): Promise<Buffer>;
  /** Removes the chunks' bytes kept outside the index (their rows are deleted by the caller). */
  remove(keys: ChunkKey[]): Promise<void>;
}

/** The PostgreSQL backend: a chunk's bytes are its index row's `data`. */
export const postgresStorage: RecordingStorage = {
  kind: 'postgres',
  put: async (_key, data) => data,
  get: async (key, inline) => {
    if (!inline) throw new Error(`chunk ${key.seq} of recording ${key.recordingId} has no data`);
    return inline;
  },
  remove: async () => undefined,
};
