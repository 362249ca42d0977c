import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();
const alpha = await ctx.tenant('alpha');
const beta = await ctx.tenant('beta');

const send = (key: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
  ctx.call(key, '/v1/emails', { method: 'POST', body, headers });

async function storedEmail(id: string) {
  const [row] = await ctx.sql`select * from emails where id = ${id}`;
  return row;
}

async function jobFor(id: string) {
  const [job] = await ctx.sql<[{ taskIdentifier: string; payload: Record<string, string>; maxAttempts: number; key: string }?]>`
    select j.task_identifier, p.payload, j.max_attempts, j.key from graphile_worker.jobs j
    join graphile_worker._private_jobs p on p.id = j.id where j.key = ${id}`;
  return job;
}

test('a text email answers 201 queued, is stored and has its email__send job', async () => {
  const res = await send(alpha.key, { from: 'Acme <billing@acme.test>', to: 'alice@example.test', subject: 'Hi', text: 'Hello' });
  assert.equal(res.status, 201);
  const body = (await res.json()) as { id: string; status: string };
  assert.match(body.id, /^email_[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.equal(body.status, 'queued');
  assert.equal(res.headers.get('idempotent-replayed'), null);
  assert.ok(res.headers.get('x-ratelimit-limit'));

  const row = await storedEmail(body.id);
  assert.equal(row!.projectId, alpha.projectId);
  assert.equal(row!.status, 'queued');
  assert.equal(row!.fromAddress, 'Acme <billing@acme.test>');
  assert.deepEqual(row!.toAddresses, ['alice@example.test']);
  assert.deepEqual(row!.ccAddresses, []);
  assert.equal(row!.text, 'Hello');
  assert.equal(row!.html, null);

  const job = await jobFor(body.id);
  assert.equal(job?.taskIdentifier, 'email__send');
  assert.deepEqual(job?.payload, { email_id: body.id, project_id: alpha.projectId });
  assert.equal(job?.maxAttempts, 25);
});

test('html, lists, cc/bcc/reply_to, headers and attachments are stored as sent', async () => {
  const bytes = randomBytes(512);
  const res = await send(alpha.key, {
    from: 'billing@acme.test',
    to: ['Alice <alice@example.test>', 'bob@example.test'],
    cc: 'carol@example.test',
    bcc: ['"Hidden, One" <h1@example.test>', 'h2@example.test'],
    reply_to: 'support@acme.test',
    subject: 'Invoice ✓',
    html: '<p>Hi</p>',
    text: 'Hi',
    headers: { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@acme.test>' },
    attachments: [
      { filename: 'a.pdf', content: bytes.toString('base64'), content_type: 'application/pdf' },
      { filename: 'b.bin', content: 'aGVs\nbG8=' },
    ],
  });
  assert.equal(res.status, 201);
  const { id } = (await res.json()) as { id: string };
  const row = await storedEmail(id);
  assert.deepEqual(row!.toAddresses, ['Alice <alice@example.test>', 'bob@example.test']);
  assert.deepEqual(row!.ccAddresses, ['carol@example.test']);
  assert.deepEqual(row!.bccAddresses, ['"Hidden, One" <h1@example.test>', 'h2@example.test']);
  assert.deepEqual(row!.replyToAddresses, ['support@acme.test']);
  assert.equal(row!.subject, 'Invoice ✓');
  assert.deepEqual(row!.headers, { 'X-Campaign': 'spring', 'List-Unsubscribe': '<mailto:u@acme.test>' });
  assert.deepEqual(row!.attachments, [
    { filename: 'a.pdf', content_type: 'application/pdf', content: bytes.toString('base64') },
    { filename: 'b.bin', content_type: 'application/octet-stream', content: 'aGVsbG8=' },
  ]);

  // What the API shows: everything but bcc and attachments.
  const got = await ctx.call(alpha.key, `/v1/emails/${id}`);
  assert.equal(got.status, 200);
  const email = (await got.json()) as Record<string, unknown>;
  assert.deepEqual(email.to, ['Alice <alice@example.test>', 'bob@example.test']);
  assert.deepEqual(email.cc, ['carol@example.test']);
  assert.deepEqual(email.reply_to, ['support@acme.test']);
  assert.equal(email.html, '<p>Hi</p>');
  assert.equal(email.status, 'queued');
  assert.ok(!('bcc' in email));
  assert.ok(!JSON.stringify(email).includes('h1@example.test'));
  assert.ok(!('attachments' in email));

  const list = (await (await ctx.call(alpha.key, '/v1/emails')).json()) as { data: unknown[] };
  assert.ok(!JSON.stringify(list).includes('h2@example.test'));
});

test('empty strings and nulls count as absent', async () => {
  const res = await send(alpha.key, { from: 'a@acme.test', to: 'b@example.test', subject: '', html: '<b>x</b>', text: '', cc: null, bcc: null, reply_to: null });
  assert.equal(res.status, 201);
  const row = await storedEmail(((await res.json()) as { id: string }).id);
  assert.equal(row!.text, null);
  assert.deepEqual(row!.bccAddresses, []);
});

test('authentication is required, and a wrong key writes nothing', async () => {
  const before = await ctx.sql`select count(*)::int as n from emails`;
  const body = { from: 'a@acme.test', to: 'b@example.test', subject: 's', text: 't' };
  for (const key of [undefined, 'sk_' + 'x'.repeat(43), 'not-a-key']) {
    const res = await send(key, body);
    assert.equal(res.status, 401);
    assert.deepEqual(await res.json(), { error: { type: 'authentication_failed', message: 'Invalid or missing API key.' } });
  }
  const after = await ctx.sql`select count(*)::int as n from emails`;
  assert.equal(after[0]!.n, before[0]!.n);
});

test('an email belongs to the sending project only', async () => {
  const res = await send(alpha.key, { from: 'a@acme.test', to: 'b@example.test', subject: 's', text: 't' });
  const { id } = (await res.json()) as { id: string };
  assert.equal((await ctx.call(beta.key, `/v1/emails/${id}`)).status, 404);
  assert.equal((await ctx.call(alpha.key, `/v1/emails/${id}`)).status, 200);
});

test('a refused request writes neither a row nor a job', async () => {
  const emails = await ctx.sql`select count(*)::int as n from emails`;
  const jobs = await ctx.sql`select count(*)::int as n from graphile_worker.jobs`;
  const res = await send(alpha.key, { from: 'a@acme.test', to: 'b@example.test', subject: 's' });
  assert.equal(res.status, 422);
  assert.ok(res.headers.get('x-ratelimit-remaining'), 'refusals carry the rate-limit headers too');
  assert.equal((await ctx.sql`select count(*)::int as n from emails`)[0]!.n, emails[0]!.n);
  assert.equal((await ctx.sql`select count(*)::int as n from graphile_worker.jobs`)[0]!.n, jobs[0]!.n);
});

test('the schema documents the send route with named components', async () => {
  const doc = (await (await ctx.call(undefined, '/openapi.json')).json()) as {
    paths: Record<string, Record<string, { requestBody: unknown; responses: Record<string, unknown>; parameters: { name: string }[] }>>;
    components: { schemas: Record<string, unknown> };
  };
  const post = doc.paths['/v1/emails']!.post!;
  assert.deepEqual(Object.keys(post.responses).sort(), ['201', '401', '409', '413', '422', '429']);
  assert.deepEqual(post.requestBody, { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/SendEmailRequest' } } } });
  assert.ok(post.parameters.some((p) => p.name === 'idempotency-key'));
  for (const name of ['SendEmailRequest', 'AttachmentRequest', 'SendEmailResponse']) assert.ok(doc.components.schemas[name], name);
  assert.ok(doc.paths['/v1/emails']!.get, 'the list route is still there');
});
