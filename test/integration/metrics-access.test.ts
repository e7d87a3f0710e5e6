/** /metrics is for the deployment's scraper: a bearer token (METRICS_TOKEN or ADMIN_TOKEN), 404 when neither is set. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, startTestService } from '../helpers/service.js';

const METRICS_TOKEN = 'metrics-scraper-token-0123456789';

describe('metrics access', () => {
  it('needs METRICS_TOKEN or ADMIN_TOKEN; anything else is 401 in the envelope', async () => {
    const t = await startTestService({ METRICS_TOKEN });
    try {
      for (const auth of [undefined, 'Bearer wrong-token-0123456789', `Bearer ${METRICS_TOKEN}x`]) {
        const req = t.http.get('/metrics');
        const res = await (auth ? req.set('Authorization', auth) : req);
        assert.equal(res.status, 401, String(auth));
        assert.equal(res.body.error.code, 'unauthorized');
        assert.doesNotMatch(res.text, /http_requests_total/);
      }
      for (const token of [METRICS_TOKEN, ADMIN_TOKEN]) {
        const res = await t.http.get('/metrics').set('Authorization', `Bearer ${token}`);
        assert.equal(res.status, 200);
        assert.match(res.text, /process_cpu_seconds_total/);
      }
    } finally {
      await t.close();
    }
  });

  it('answers 404 when neither token is set', async () => {
    const t = await startTestService({ ADMIN_TOKEN: '' });
    try {
      const res = await t.http.get('/metrics');
      assert.equal(res.status, 404);
      assert.equal(res.body.error.code, 'route_not_found');
    } finally {
      await t.close();
    }
  });
});
