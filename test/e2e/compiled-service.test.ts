/**
 * Production runs compiled JavaScript: `npm run build` writes dist/, and `npm start`'s command (`node`,
 * its flags, `dist/src/main.js`) serves the contract, the dashboard and the SDK, extracts an uploaded HTML document in
 * its worker pool, and stops cleanly, with no TypeScript loader in the process.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import supertest from 'supertest';
import { build } from '../../scripts/build.js';
import { productionStart } from '../../scripts/production-start.js';
import { createTestDatabase } from '../helpers/database.js';
import { signupWithKey, startProcess, type ServiceProcess } from '../helpers/process.js';
import { waitFor } from '../helpers/realtime.js';

const root = path.resolve(import.meta.dirname, '../..');
let db: { url: string; drop(): Promise<void> };
let dataDir: string;
let service: ServiceProcess | undefined;

before(async () => {
  await build();
  db = await createTestDatabase();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'vas-compiled-'));
});
after(async () => {
  await service?.stop('SIGTERM');
  await db?.drop();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('the compiled service', () => {
  it('builds to dist/ and runs there with plain node', async () => {
    assert.ok(fs.existsSync(path.join(root, 'dist/src/main.js')));
    assert.ok(fs.existsSync(path.join(root, 'dist/src/knowledge/extract-worker.js')), 'the extraction worker is compiled too');
    assert.ok(fs.existsSync(path.join(root, 'dist/src/sandbox/carriers/audio/beep.ulaw-8k.raw')), 'assets beside their modules');

    service = await startProcess({ DATABASE_URL: db.url, DATA_DIR: dataDir }, { compiled: true });
    const pid = service.child.pid!;
    const argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
    const production = productionStart();
    assert.equal(production.script, 'dist/src/main.js');
    assert.deepEqual(argv.slice(1), [...production.nodeFlags, 'dist/src/main.js'], "npm start's command, no --import tsx");

    const http = supertest(service.url);
    assert.equal((await http.get('/readyz')).status, 200);
    assert.equal((await http.get('/dashboard')).status, 200);
    assert.equal((await http.get('/sdk/voice-agent-client.js')).status, 200);
    assert.equal((await http.get('/openapi.json')).body.info.version, '1.0.0');

    const { auth } = await signupWithKey(http, 'Compiled');
    const html = '<html><body><h1>Opening hours</h1><p>We are open from nine to five on weekdays.</p><script>ignored()</script></body></html>';
    const upload = await http.post('/api/v1/documents').set(auth).attach('file', Buffer.from(html), { filename: 'hours.html', contentType: 'text/html' });
    assert.equal(upload.status, 201, upload.text);
    const doc = await waitFor(
      async () => {
        const res = await http.get(`/api/v1/documents/${upload.body.doc_id}`).set(auth);
        return res.body.status === 'ready' ? res.body : null;
      },
      15_000,
      'the document to be extracted',
    );
    assert.ok(doc.char_count > 20 && doc.char_count < html.length, JSON.stringify(doc));

    assert.equal(await service.stop('SIGTERM'), 0, service.output());
    service = undefined;
  });
});
