/** A local S3-compatible server (s3rver, files in a temp directory) for the S3 recording storage's tests. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import S3rver from 's3rver';

export interface LocalS3 {
  endpoint: string;
  bucket: string;
  env: Record<string, string>;
  close(): Promise<void>;
}

/** s3rver checks signatures against its one built-in key pair. */
const ACCESS_KEY = 'S3RVER';

export async function startLocalS3(bucket = 'recordings'): Promise<LocalS3> {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 's3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory, configureBuckets: [{ name: bucket }] });
  const { port } = (await server.run()) as { port: number };
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    env: {
      RECORDING_STORAGE: 's3',
      RECORDING_S3_ENDPOINT: endpoint,
      RECORDING_S3_BUCKET: bucket,
      RECORDING_S3_ACCESS_KEY_ID: ACCESS_KEY,
      RECORDING_S3_SECRET_ACCESS_KEY: ACCESS_KEY,
      RECORDING_S3_FORCE_PATH_STYLE: 'true',
    },
    async close() {
      await server.close();
      fs.rmSync(directory, { recursive: true, force: true });
    },
  };
}
