/**
 * Hostile documents cannot stop the service: extraction runs in worker threads with a time limit, and
 * HTML is read by a streaming parser (linear whatever the markup). While a hostile upload is being
 * read, `/healthz` still answers within a second.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { bearer } from '../helpers/realtime.js';

let t: TestService;
let tn: Tenant;

before(async () => {
  t = await startTestService();
  tn = await tenant(t);
});

after(async () => {
  await t.close();
});

const upload = (svc: TestService, key: string, file: Buffer, filename: string, contentType: string) =>
  svc.http.post('/api/v1/documents').set(bearer(key)).attach('file', file, { filename, contentType });

/** How long /healthz takes at its slowest while `work` runs. */
async function slowestHealthz(work: Promise<unknown>): Promise<number> {
  let done = false;
  let slowest = 0;
  void work.finally(() => (done = true));
  while (!done) {
    const t0 = Date.now();
    const res = await t.http.get('/healthz');
    assert.equal(res.status, 200);
    slowest = Math.max(slowest, Date.now() - t0);
    await new Promise((r) => setTimeout(r, 20));
  }
  return slowest;
}

describe('hostile documents', () => {
  it('HTML of unclosed tags is read in linear time, off the event loop', async () => {
    const html = `<p>Opening hours: nine to five.</p>${'<a'.repeat(400_000)}`;
    const started = upload(t, tn.apiKey, Buffer.from(html), 'trap.html', 'text/html').then((r) => r);
    const slowest = await slowestHealthz(started);
    const res = await started;
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.ok(slowest < 1000, `/healthz answered within a second during the upload (slowest ${slowest} ms)`);
    const doc = await t.service.db.knex('knowledge_chunks').where({ document_id: res.body.doc_id }).first('text');
    assert.match(doc.text, /^Opening hours: nine to five\./);
  });

  it('HTML without a closed <head> keeps its body text, and hidden elements stay hidden', async () => {
    const html = '<html><head><title>T</title><body><p>Visible &amp; kept</p><script>secret()</script><template>hidden</template></body>';
    const res = await upload(t, tn.apiKey, Buffer.from(html), 'page.html', 'text/html');
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const chunks = await t.service.db.knex('knowledge_chunks').where({ document_id: res.body.doc_id }).select('text');
    assert.deepEqual(
      chunks.map((c: { text: string }) => c.text),
      ['Visible & kept'],
    );
  });

  it('a file that takes longer than the time limit is refused, and the service goes on', async () => {
    const quick = await startTestService({ KNOWLEDGE_EXTRACT_TIMEOUT_MS: '100' });
    try {
      const who = await tenant(quick);
      const res = await upload(quick, who.apiKey, Buffer.from(`<p>x</p>${'<a'.repeat(2_000_000)}`), 'big.html', 'text/html');
      assert.equal(res.status, 422, JSON.stringify(res.body));
      assert.equal(res.body.error.code, 'document_unreadable');
      assert.match(res.body.error.message, /took longer than/);
      const [{ count }] = await quick.service.db.knex('documents').count<{ count: string }[]>('* as count');
      assert.equal(Number(count), 0, 'nothing stored');
      assert.equal((await quick.http.get('/healthz')).status, 200);
    } finally {
      await quick.close();
    }
  });
});
