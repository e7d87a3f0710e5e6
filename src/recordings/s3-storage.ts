/**
 * The S3-compatible backend (AWS SDK v3): each chunk of a recording is one object,
 * `<prefix><workspace>/<recording>/<seq, 8 digits>.pcm`, written once and never changed, so a crash
 * mid-call leaves every chunk written before it readable. Endpoint, bucket, region and credentials
 * come from configuration (credentials unset: the SDK's default chain).
 */
import { DeleteObjectsCommand, GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import type { ChunkKey, RecordingStorage } from './storage.js';

export interface S3StorageOptions {
  endpoint?: string;
  bucket: string;
  region: string;
  accessKeyId?: string;
  secretAccessKey?: string;
  prefix: string;
  forcePathStyle: boolean;
}

/** DeleteObjects takes at most this many keys. */
const DELETE_BATCH = 1000;

export class S3Storage implements RecordingStorage {
  readonly kind = 's3' as const;
  private readonly client: S3Client;

  constructor(private readonly o: S3StorageOptions) {
    this.client = new S3Client({
      region: o.region,
      endpoint: o.endpoint,
      forcePathStyle: o.forcePathStyle,
      credentials: o.accessKeyId && o.secretAccessKey ? { accessKeyId: o.accessKeyId, secretAccessKey: o.secretAccessKey } : undefined,
      // Checksums only where S3 requires them: S3-compatible servers differ in the newer ones.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  private key(k: ChunkKey): string {
    return `${this.o.prefix}${k.workspaceId}/${k.recordingId}/${String(k.seq).padStart(8, '0')}.pcm`;
  }

  async put(key: ChunkKey, data: Buffer): Promise<null> {
    await this.client.send(new PutObjectCommand({ Bucket: this.o.bucket, Key: this.key(key), Body: data, ContentType: 'application/octet-stream' }));
    return null;
  }

  async get(key: ChunkKey): Promise<Buffer> {
    const res = await this.client.send(new GetObjectCommand({ Bucket: this.o.bucket, Key: this.key(key) }));
    if (!res.Body) throw new Error(`recording object ${this.key(key)} has no body`);
    return Buffer.from(await res.Body.transformToByteArray());
  }

  async remove(keys: ChunkKey[]): Promise<void> {
    for (let i = 0; i < keys.length; i += DELETE_BATCH) {
      const batch = keys.slice(i, i + DELETE_BATCH);
      await this.client.send(new DeleteObjectsCommand({ Bucket: this.o.bucket, Delete: { Objects: batch.map((k) => ({ Key: this.key(k) })), Quiet: true } }));
    }
  }
}
