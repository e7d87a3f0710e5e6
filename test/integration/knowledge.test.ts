import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import { startTestService, type TestService } from '../helpers/service.js';
import { tenant, type Tenant } from '../helpers/fixtures.js';
import { waitFor } from '../helpers/realtime.js';
import { UPLOAD_TMP_DIR } from '../../src/http/body-parsing.js';

let t: TestService;
let tn: Tenant;
let other: Tenant;
before(async () => {
  t = await startTestService();
  tn = await tenant(t);
  other = await tenant(t, 'Other Co');
});
after(() => t.close());

const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

async function pdfWithText(lines: string[]): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  const page = doc.addPage([600, 800]);
  lines.forEach((line, i) => page.drawText(line, { x: 50, y: 740 - i * 20, size: 12, font }));
  return Buffer.from(await doc.save());
}

async function pdfWithoutText(): Promise<Buffer> {
  const doc = await PDFDocument.create();
  doc.addPage([600, 800]).drawRectangle({ x: 50, y: 50, width: 100, height: 100 });
  return Buffer.from(await doc.save());
}

function upload(file: Buffer, filename: string, contentType?: string, fields: Record<string, string> = {}, key = tn.apiKey) {
  let req = t.http.post('/api/v1/documents').set(bearer(key));
  for (const [k, v] of Object.entries(fields)) req = req.field(k, v);
  return req.attach('file', file, contentType ? { filename, contentType } : { filename });
}

async function uploadText(name: string, text: string, key = tn.apiKey) {
  const res = await t.http.post('/api/v1/documents/text').set(bearer(key)).send({ name, text });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

async function createAgent(key = tn.apiKey) {
  const res = await t.http.post('/api/v1/agents').set(bearer(key)).send({ name: 'Knows things' });
  assert.equal(res.status, 201);
  return res.body.agent_id as string;
}

const docCount = (workspaceId: string) =>
  t.service.db
    .knex('documents')
    .where({ workspace_id: workspaceId })
    .count<{ count: string }[]>('* as count')
    .then((r) => Number(r[0].count));
const chunkCount = () =>
  t.service.db
    .knex('knowledge_chunks')
    .count<{ count: string }[]>('* as count')
    .then((r) => Number(r[0].count));

describe('knowledge: upload', () => {
  it('takes JSON {name, text}: stored as text/plain, chunked and indexed', async () => {
    const text = 'We are open Monday to Friday, 8 am to 6 pm. '.repeat(100);
    const doc = await uploadText('Opening hours', text);
    assert.match(doc.doc_id, /^doc_[0-9A-Z]{26}$/);
    assert.equal(doc.name, 'Opening hours');
    assert.equal(doc.content_type, 'text/plain');
    assert.equal(doc.size_bytes, Buffer.byteLength(text));
    assert.equal(doc.char_count, text.trim().length);
    assert.equal(doc.status, 'ready');
    assert.ok(doc.chunk_count > 1);
    const chunks = await t.service.db.knex('knowledge_chunks').where({ document_id: doc.doc_id }).orderBy('chunk_index');
    assert.equal(chunks.length, doc.chunk_count);
    assert.deepEqual(
      chunks.map((c) => c.chunk_index),
      [...Array(doc.chunk_count).keys()],
    );
    assert.ok(chunks[0].tsv.length > 0, 'the passage is indexed');
    const got = await t.http.get(`/api/v1/documents/${doc.doc_id}`).set(bearer(tn.apiKey));
    assert.deepEqual(got.body, doc);
  });

  it('takes plain text, Markdown (by extension), HTML (visible text only) and PDF files', async () => {
    const plain = await upload(Buffer.from('Parking is free behind the clinic.'), 'parking.txt', 'text/plain');
    assert.equal(plain.status, 201, plain.text);
    assert.equal(plain.body.name, 'parking.txt');
    assert.equal(plain.body.content_type, 'text/plain');

    const md = await upload(Buffer.from('# Fees\n\nA missed appointment costs **25 dollars**.'), 'fees.md', 'application/octet-stream', {
      name: 'Fee schedule',
    });
    assert.equal(md.status, 201, md.text);
    assert.equal(md.body.content_type, 'text/markdown');
    assert.equal(md.body.name, 'Fee schedule');

    const html =
      '<!doctype html><html><head><title>T</title><style>.x{color:red}</style></head><body><script>var secret = 1;</script><h1>Insurance</h1><p>We accept Delta&nbsp;Dental &amp; Cigna.</p><!-- hidden --></body></html>';
    const h = await upload(Buffer.from(html), 'insurance.html', 'text/html');
    assert.equal(h.status, 201, h.text);
    assert.equal(h.body.content_type, 'text/html');
    const [hc] = await t.service.db.knex('knowledge_chunks').where({ document_id: h.body.doc_id });
    assert.equal(hc.text, 'Insurance\n\nWe accept Delta Dental & Cigna.');

    const pdf = await pdfWithText(['Cancellation policy', 'Appointments cancelled late cost a fee of 25 dollars.']);
    const p = await upload(pdf, 'policy.pdf', 'application/pdf');
    assert.equal(p.status, 201, p.text);
    assert.equal(p.body.content_type, 'application/pdf');
    assert.equal(p.body.size_bytes, pdf.length);
    const [pc] = await t.service.db.knex('knowledge_chunks').where({ document_id: p.body.doc_id });
    assert.match(pc.text, /Appointments cancelled late cost a fee of 25 dollars/);
  });

  it('refuses bad uploads with 413/415/422 and stores nothing; temporary files are removed', async () => {
    const ws = await tenant(t);
    const chunksBefore = await chunkCount();
    const broken = (await pdfWithText(['Some text'])).subarray(0, 200);
    const cases: Array<[() => ReturnType<typeof upload> | Promise<Awaited<ReturnType<typeof upload>>>, number, string, string | null]> = [
      [
        () =>
          upload(Buffer.from('PK\u0003\u0004 docx'), 'policy.docx', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', {}, ws.apiKey),
        415,
        'unsupported_file_type',
        'file',
      ],
      [() => upload(Buffer.from('abc'), 'image.png', 'application/octet-stream', {}, ws.apiKey), 415, 'unsupported_file_type', 'file'],
      [() => upload(broken, 'broken.pdf', 'application/pdf', {}, ws.apiKey), 422, 'document_unreadable', 'file'],
      [async () => upload(await pdfWithoutText(), 'scan.pdf', 'application/pdf', {}, ws.apiKey), 422, 'document_unreadable', 'file'],
      [() => upload(Buffer.from([0xff, 0xfe, 0xfd, 0x41]), 'latin.txt', 'text/plain', {}, ws.apiKey), 422, 'document_unreadable', 'file'],
      [() => upload(Buffer.from('   \n\t  '), 'blank.txt', 'text/plain', {}, ws.apiKey), 422, 'document_empty', 'file'],
      [() => upload(Buffer.from('<html><script>x()</script></html>'), 'empty.html', 'text/html', {}, ws.apiKey), 422, 'document_empty', 'file'],
      [() => upload(Buffer.from('hello'), 'a.txt', 'text/plain', { colour: 'red' }, ws.apiKey), 422, 'unknown_field', 'colour'],
      [() => upload(Buffer.alloc(10 * 1024 * 1024 + 10, 'a'), 'huge.txt', 'text/plain', {}, ws.apiKey), 413, 'payload_too_large', 'file'],
    ];
    for (const [send, status, code, param] of cases) {
      const res = await send();
      assert.equal(res.status, status, `${code}: ${res.text}`);
      assert.equal(res.body.error.code, code, res.text);
      assert.equal(res.body.error.param, param);
    }
    const two = await t.http
      .post('/api/v1/documents')
      .set(bearer(ws.apiKey))
      .attach('file', Buffer.from('a'), 'a.txt')
      .attach('file', Buffer.from('b'), 'b.txt');
    assert.equal(two.status, 422, two.text);
    assert.equal(two.body.error.param, 'file');
    const noFile = await t.http.post('/api/v1/documents').set(bearer(ws.apiKey)).field('name', 'x');
    assert.equal(noFile.status, 422);
    assert.equal(noFile.body.error.code, 'missing_field');
    for (const [body, code, param] of [
      [{ name: 'x', text: '   ' }, 'document_empty', 'text'],
      [{ name: 'x' }, 'missing_field', 'text'],
      [{ text: 'x' }, 'missing_field', 'name'],
      [{ name: 'x', text: 'y', colour: 'red' }, 'unknown_field', 'colour'],
      [{ name: '', text: 'y' }, 'invalid_value', 'name'],
    ] as const) {
      const res = await t.http.post('/api/v1/documents/text').set(bearer(ws.apiKey)).send(body);
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.error.code, code);
      assert.equal(res.body.error.param, param);
    }
    const bigJson = await t.http
      .post('/api/v1/documents/text')
      .set(bearer(ws.apiKey))
      .send({ name: 'big', text: 'a'.repeat(10 * 1024 * 1024 + 1) });
    assert.equal(bigJson.status, 413);
    const wrongType = await t.http.post('/api/v1/documents').set(bearer(ws.apiKey)).set('Content-Type', 'text/plain').send('hello');
    assert.equal(wrongType.status, 415);
    assert.equal(wrongType.body.error.code, 'unsupported_media_type');
    // The JSON form is its own operation (createTextDocument, POST /api/v1/documents/text).
    const jsonToUpload = await t.http.post('/api/v1/documents').set(bearer(ws.apiKey)).send({ name: 'x', text: 'y' });
    assert.equal(jsonToUpload.status, 415, jsonToUpload.text);
    assert.equal(jsonToUpload.body.error.code, 'unsupported_media_type');
    assert.match(jsonToUpload.body.error.message, /POST \/api\/v1\/documents\/text/, 'says where JSON text goes');
    const unauthenticated = await t.http.post('/api/v1/documents').attach('file', Buffer.from('x'), 'x.txt');
    assert.equal(unauthenticated.status, 401);
    // An unknown key gets 401 like a missing one (body-parsing.ts checks the key before it parses anything).
    const madeUpKey = await t.http
      .post('/api/v1/documents')
      .set(bearer(`ek_${'x'.repeat(40)}`))
      .attach('file', Buffer.alloc(2 * 1024 * 1024, 'a'), 'big.txt');
    assert.equal(madeUpKey.status, 401);
    assert.equal(madeUpKey.body.error.code, 'unauthorized');

    assert.equal(await docCount(ws.workspaceId), 0);
    assert.equal(await chunkCount(), chunksBefore);
    // A refused upload's file is removed once its stream has closed, which can be just after the answer.
    await waitFor(async () => fs.readdirSync(UPLOAD_TMP_DIR).length === 0, 5000, 'every temporary upload file removed');
  });

  it('accepts JSON bodies above the general 1 MB limit, up to 10 MB', async () => {
    const text = 'word '.repeat(300_000);
    const doc = await uploadText('Large', text);
    assert.equal(doc.size_bytes, text.length);
  });
});

describe('knowledge: documents', () => {
  it('lists newest first, gets, deletes; 403 and 404 for others and none', async () => {
    const ws = await tenant(t);
    const a = await uploadText('A', 'alpha', ws.apiKey);
    const b = await uploadText('B', 'beta', ws.apiKey);
    const list = await t.http.get('/api/v1/documents?limit=1').set(bearer(ws.apiKey));
    assert.deepEqual(list.body.data, [b]);
    assert.equal(list.body.has_more, true);
    const foreign = await uploadText('F', 'foreign', other.apiKey);
    for (const method of ['get', 'delete'] as const) {
      assert.equal((await t.http[method](`/api/v1/documents/${foreign.doc_id}`).set(bearer(ws.apiKey))).status, 403);
      const none = await t.http[method]('/api/v1/documents/doc_01JD5Z7Q8Y1C2B3A4N5M6K7P9C').set(bearer(ws.apiKey));
      assert.equal(none.status, 404);
      assert.equal(none.body.error.code, 'document_not_found');
    }
    const del = await t.http.delete(`/api/v1/documents/${a.doc_id}`).set(bearer(ws.apiKey));
    assert.deepEqual(del.body, { status: 'deleted', doc_id: a.doc_id });
    assert.equal((await t.http.get(`/api/v1/documents/${a.doc_id}`).set(bearer(ws.apiKey))).status, 404);
    assert.equal((await t.service.db.knex('knowledge_chunks').where({ document_id: a.doc_id })).length, 0);
    assert.ok(await t.service.db.knex('documents').where({ id: foreign.doc_id }).first());
  });
});

describe('knowledge: agent documents and search', () => {
  it('attaches a copy (adoc_), refuses a second attach, detaches by either id; the workspace doc stays', async () => {
    const agentId = await createAgent();
    const doc = await uploadText('Policy', 'Cancellations within 24 hours cost 25 dollars.');
    const res = await t.http.post(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey)).send({ doc_id: doc.doc_id });
    assert.equal(res.status, 201, res.text);
    assert.match(res.body.doc_id, /^adoc_[0-9A-Z]{26}$/);
    assert.deepEqual(
      { ...res.body, doc_id: undefined, created_at: undefined },
      { ...doc, doc_id: undefined, created_at: undefined, source_doc_id: doc.doc_id, agent_id: agentId },
    );

    const again = await t.http.post(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey)).send({ doc_id: doc.doc_id });
    assert.equal(again.status, 409);
    assert.equal(again.body.error.code, 'document_already_attached');
    assert.match(again.body.error.message, new RegExp(res.body.doc_id));

    const list = await t.http.get(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey));
    assert.deepEqual(list.body.data, [res.body]);

    const detached = await t.http.delete(`/api/v1/agents/${agentId}/documents/${res.body.doc_id}`).set(bearer(tn.apiKey));
    assert.equal(detached.status, 200);
    assert.deepEqual(detached.body, { status: 'detached', doc_id: res.body.doc_id });
    assert.equal((await t.http.get(`/api/v1/documents/${doc.doc_id}`).set(bearer(tn.apiKey))).status, 200, 'the workspace document stays');
    assert.ok(
      (await t.service.db.knex('knowledge_chunks').where({ agent_document_id: res.body.doc_id })).length > 0,
      'the copy and its passages are kept for the versions that link it',
    );
    assert.deepEqual((await t.http.get(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey))).body.data, [], "not in the draft's list");
    const gone = await t.http.delete(`/api/v1/agents/${agentId}/documents/${res.body.doc_id}`).set(bearer(tn.apiKey));
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'document_not_found');

    // Detaching by the workspace document's id means this agent's copy.
    const re = await t.http.post(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey)).send({ doc_id: doc.doc_id });
    assert.equal(re.body.doc_id, res.body.doc_id, 'attached again: its earlier copy comes back');
    const byDoc = await t.http.delete(`/api/v1/agents/${agentId}/documents/${doc.doc_id}`).set(bearer(tn.apiKey));
    assert.deepEqual(byDoc.body, { status: 'detached', doc_id: re.body.doc_id });
  });

  it('refuses foreign and unknown agents and documents, attaching nothing', async () => {
    const agentId = await createAgent();
    const foreignAgent = await createAgent(other.apiKey);
    const doc = await uploadText('Mine', 'mine');
    const foreignDoc = await uploadText('Theirs', 'theirs', other.apiKey);
    const cases: Array<[string, unknown, number, string]> = [
      [`/api/v1/agents/${foreignAgent}/documents`, { doc_id: doc.doc_id }, 403, 'forbidden'],
      [`/api/v1/agents/${agentId}/documents`, { doc_id: foreignDoc.doc_id }, 403, 'forbidden'],
      ['/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V/documents', { doc_id: doc.doc_id }, 404, 'agent_not_found'],
      [`/api/v1/agents/${agentId}/documents`, { doc_id: 'doc_01JD5Z7Q8Y1C2B3A4N5M6K7P9C' }, 404, 'document_not_found'],
      [`/api/v1/agents/${agentId}/documents`, { doc_id: doc.doc_id, extra: 1 }, 422, 'unknown_field'],
      [`/api/v1/agents/${agentId}/documents`, {}, 422, 'missing_field'],
    ];
    for (const [p, body, status, code] of cases) {
      const res = await t.http
        .post(p)
        .set(bearer(tn.apiKey))
        .send(body as object);
      assert.equal(res.status, status, `${p} ${JSON.stringify(body)}: ${res.text}`);
      assert.equal(res.body.error.code, code);
    }
    assert.equal((await t.http.get(`/api/v1/agents/${foreignAgent}/documents`).set(bearer(tn.apiKey))).status, 403);
    assert.equal((await t.http.delete(`/api/v1/agents/${foreignAgent}/documents/${doc.doc_id}`).set(bearer(tn.apiKey))).status, 403);
    assert.equal((await t.service.db.knex('agent_documents').whereIn('agent_id', [agentId, foreignAgent])).length, 0);
  });

  it('searches the agent documents: ranked passages, limit, empty results, empty_query', async () => {
    const agentId = await createAgent();
    const empty = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'fee' });
    assert.deepEqual(empty.body, { object: 'list', data: [] });

    const policy = await uploadText(
      'Cancellation policy',
      'Appointments cancelled less than 24 hours in advance are charged a cancellation fee of 25 dollars. The fee is waived for emergencies.',
    );
    const hours = await uploadText('Opening hours', 'We are open Monday to Friday. A fee is never charged for walk-ins.');
    const unrelated = await uploadText('Parking', 'Parking is free behind the building.');
    const notAttached = await uploadText('Secret', 'cancellation fee cancellation fee cancellation fee');
    const copies: Record<string, string> = {};
    for (const d of [policy, hours, unrelated]) {
      const res = await t.http.post(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey)).send({ doc_id: d.doc_id });
      copies[d.doc_id] = res.body.doc_id;
    }
    const res = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'cancellation fee' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.data.length, 1, 'only passages with every word match');
    const hit = res.body.data[0];
    assert.equal(hit.doc_id, copies[policy.doc_id]);
    assert.equal(hit.source_doc_id, policy.doc_id);
    assert.equal(hit.name, 'Cancellation policy');
    assert.equal(hit.chunk_index, 0);
    assert.ok(hit.score > 0);
    assert.ok(!JSON.stringify(res.body).includes(notAttached.doc_id));

    const either = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'fee or parking' });
    assert.equal(either.body.data.length, 3);
    const scores = either.body.data.map((h: { score: number }) => h.score);
    assert.deepEqual(
      scores,
      [...scores].sort((a: number, b: number) => b - a),
      'best first',
    );
    assert.equal(either.body.data[0].doc_id, copies[policy.doc_id], 'the passage with the word twice ranks first');
    const limited = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'fee or parking', limit: 2 });
    assert.equal(limited.body.data.length, 2);
    const excluded = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'fee -emergencies' });
    assert.deepEqual(
      excluded.body.data.map((h: { doc_id: string }) => h.doc_id),
      [copies[hours.doc_id]],
    );

    for (const [body, code] of [
      [{ query: '!!! ...' }, 'empty_query'],
      [{ query: '' }, 'invalid_value'],
      [{ query: 'x', limit: 21 }, 'invalid_value'],
      [{ query: 'x', colour: 1 }, 'unknown_field'],
    ] as const) {
      const bad = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send(body);
      assert.equal(bad.status, 422, bad.text);
      assert.equal(bad.body.error.code, code);
    }
    const foreignAgent = await createAgent(other.apiKey);
    assert.equal((await t.http.post(`/api/v1/agents/${foreignAgent}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'fee' })).status, 403);
    assert.equal(
      (await t.http.post('/api/v1/agents/agt_01JD5Z7Q8Y1C2B3A4N5M6K7P8V/knowledge/search').set(bearer(tn.apiKey)).send({ query: 'fee' })).status,
      404,
    );

    // Deleting the workspace document keeps the agent copy, searchable, with source_doc_id null.
    await t.http.delete(`/api/v1/documents/${policy.doc_id}`).set(bearer(tn.apiKey));
    const after = await t.http.post(`/api/v1/agents/${agentId}/knowledge/search`).set(bearer(tn.apiKey)).send({ query: 'cancellation fee' });
    assert.equal(after.body.data[0].doc_id, copies[policy.doc_id]);
    assert.equal(after.body.data[0].source_doc_id, null);
    const listed = await t.http.get(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey));
    assert.equal(listed.body.data.find((d: { doc_id: string }) => d.doc_id === copies[policy.doc_id]).source_doc_id, null);
  });

  it('deleting an agent removes its copies and passages; workspace documents stay', async () => {
    const agentId = await createAgent();
    const doc = await uploadText('Stays', 'persistent words');
    const copy = await t.http.post(`/api/v1/agents/${agentId}/documents`).set(bearer(tn.apiKey)).send({ doc_id: doc.doc_id });
    await t.http.delete(`/api/v1/agents/${agentId}`).set(bearer(tn.apiKey));
    assert.equal(await t.service.db.knex('agent_documents').where({ id: copy.body.doc_id }).first(), undefined);
    assert.equal((await t.service.db.knex('knowledge_chunks').where({ agent_document_id: copy.body.doc_id })).length, 0);
    assert.equal((await t.http.get(`/api/v1/documents/${doc.doc_id}`).set(bearer(tn.apiKey))).status, 200);
  });
});
