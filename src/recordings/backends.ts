/** The recording storage the configuration asks for. */
import type { Config } from '../config.js';
import { postgresStorage, type RecordingStorage } from './storage.js';
import { S3Storage } from './s3-storage.js';

export function recordingStorage(config: Config): RecordingStorage {
  if (config.RECORDING_STORAGE === 'postgres') return postgresStorage;
  return new S3Storage({
    endpoint: config.RECORDING_S3_ENDPOINT,
    bucket: config.RECORDING_S3_BUCKET!,
    region: config.RECORDING_S3_REGION,
    accessKeyId: config.RECORDING_S3_ACCESS_KEY_ID,
    secretAccessKey: config.RECORDING_S3_SECRET_ACCESS_KEY,
    prefix: config.RECORDING_S3_PREFIX,
    forcePathStyle: config.RECORDING_S3_FORCE_PATH_STYLE,
  });
}
