import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Resend } from 'resend';
import { simpleParser } from 'mailparser';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { emitEvent } from '../webhooks/helpers.ts';

const ctx = await createTestContext({ env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' } });
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
// The SDK is configured only through RESEND_BASE_URL, as an application switching would be.
process.env.RESEND_BASE_URL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resend`;

const tenant = await ctx.tenant();
const resend = new Resend(tenant.key);
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
receiver.respond((_req, res) => res.writeHead(204).end());
const worker = await startTestWorker(ctx.config, ctx.sql, { webhooks: { ca: tls.cert } });

const base = { from: 'Acme <app@acme.test>', subject: 'Hello', html: '<p>Hi <img src="cid:logo"></p>' };

test('emails.send with Buffer attachments and contentId reaches the sink; emails.get reads it back', async () => {
  const { data, error } = await resend.emails.send({
    ...base, to: 'ann@example.net', cc: ['cc@example.net'], bcc: 'hidden@example.net', replyTo: 'reply@acme.test',
    text: 'Hi', tags: [{ name: 'category', value: 'welcome' }], headers: { 'X-Entity-Ref-ID': 'r-1' },
    attachments: [
      { filename: 'logo.png', content: Buffer.from('png-bytes'), contentType: 'image/png', contentId: 'logo' },
      { filename: 'notes.txt', content: Buffer.from('notes') },
    ],
  });
  assert.equal(error, null);
  assert.match(data!.id, /^email_/);
  const [caught] = await waitFor('the sink to catch it', async () => {
    const rows = await ctx.sql<{ raw: Buffer }[]>`select raw from sink_messages where email_id = ${data!.id}`;
    return rows.length === 1 && rows;
  });
  const parsed = await simpleParser(caught!.raw);
  assert.equal(parsed.subject, 'Hello');
  const logo = parsed.attachments.find((a) => a.filename === 'logo.png')!;
  assert.equal(logo.contentId, '<logo>');
  assert.equal(logo.content.toString(), 'png-bytes');
  assert.equal(parsed.attachments.find((a) => a.filename === 'notes.txt')!.content.toString(), 'notes');

  await waitFor('sent', async () => (await resend.emails.get(data!.id)).data?.last_event === 'delivered');
  const got = await resend.emails.get(data!.id);
  assert.equal(got.error, null);
  assert.equal(got.data!.object, 'email');
  assert.deepEqual(got.data!.to, ['ann@example.net']);
  assert.deepEqual(got.data!.bcc, ['hidden@example.net']);
  assert.deepEqual(got.data!.reply_to, ['reply@acme.test']);
  assert.deepEqual(got.data!.tags, [{ name: 'category', value: 'welcome' }]);
  assert.equal(got.data!.last_event, 'delivered');
});

test('emails.list pages with after and before', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push((await resend.emails.send({ ...base, to: `p${i}@example.net`, text: 'x' })).data!.id);
  const first = await resend.emails.list({ limit: 2 });
  assert.equal(first.error, null);
  assert.equal(first.data!.object, 'list');
  assert.deepEqual(first.data!.data.map((e) => e.id), [ids[3], ids[2]]);
  assert.equal(first.data!.has_more, true);
  const next = await resend.emails.list({ limit: 2, after: ids[2]! });
  assert.deepEqual(next.data!.data.map((e) => e.id), [ids[1], ids[0]]);
  const back = await resend.emails.list({ limit: 2, before: ids[1]! });
  assert.deepEqual(back.data!.data.map((e) => e.id), [ids[3], ids[2]]);
});

test('scheduledAt, emails.update and emails.cancel', async () => {
  const later = new Date(Date.now() + 3_600_000).toISOString();
  const { data } = await resend.emails.send({ ...base, to: 'later@example.net', text: 'x', scheduledAt: later });
  assert.equal((await resend.emails.get(data!.id)).data!.last_event, 'scheduled');
  const moved = await resend.emails.update({ id: data!.id, scheduledAt: new Date(Date.now() + 7_200_000).toISOString() });
  assert.equal(moved.error, null);
  assert.deepEqual(moved.data, { object: 'email', id: data!.id });
  const canceled = await resend.emails.cancel(data!.id);
  assert.deepEqual(canceled.data, { object: 'email', id: data!.id });
  assert.equal((await resend.emails.get(data!.id)).data!.last_event, 'canceled');
  const again = await resend.emails.cancel(data!.id);
  assert.equal(again.error?.name, 'validation_error');
});

test('batch.send strict and permissive', async () => {
  const strict = await resend.batch.send([{ ...base, to: 'b1@example.net', text: 'x' }, { ...base, to: 'b2@example.net', text: 'x' }]);
  assert.equal(strict.error, null);
  assert.equal(strict.data!.data.length, 2);
  const refused = await resend.batch.send([{ ...base, to: 'b3@example.net', text: 'x' }, { ...base, to: 'not an address', text: 'x' }]);
  assert.equal(refused.error?.name, 'validation_error');
  assert.match(refused.error!.message, /1\.to/);
  const permissive = await resend.batch.send(
    [{ ...base, to: 'b4@example.net', text: 'x' }, { ...base, to: 'not an address', text: 'x' }, { ...base, to: 'b5@example.net', text: 'x' }],
    { batchValidation: 'permissive' },
  );
  assert.equal(permissive.error, null);
  assert.equal(permissive.data!.data.length, 2);
  const errors = (permissive.data as unknown as { errors: { index: number; message: string }[] }).errors;
  assert.deepEqual(errors.map((e) => e.index), [1]);
});

test('idempotency keys: a repeat answers the same id, another body invalid_idempotent_request', async () => {
  const one = await resend.emails.send({ ...base, to: 'idem@example.net', text: 'x' }, { idempotencyKey: 'resend-1' });
  const two = await resend.emails.send({ ...base, to: 'idem@example.net', text: 'x' }, { idempotencyKey: 'resend-1' });
  assert.equal(two.data!.id, one.data!.id);
  const other = await resend.emails.send({ ...base, to: 'idem@example.net', text: 'changed' }, { idempotencyKey: 'resend-1' });
  assert.equal(other.error?.name, 'invalid_idempotent_request');
  assert.equal(other.error?.statusCode, 409);
});

test('errors come back with Resend\'s names, never Mailroom\'s shape', async () => {
  const missing = await fetch(`${process.env.RESEND_BASE_URL}/emails`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
  assert.equal(missing.status, 401);
  assert.deepEqual(await missing.json(), { statusCode: 401, name: 'missing_api_key', message: 'Missing API key in the authorization header.' });
  const wrong = await new Resend('sk_' + 'x'.repeat(43)).emails.send({ ...base, to: 'a@example.net', text: 'x' });
  assert.equal(wrong.error?.name, 'invalid_api_key');
  assert.equal(wrong.error?.statusCode, 403);
  const sender = await createApiKey(ctx.sql, tenant.projectId, 'sender', 'sending');
  const restricted = await new Resend(sender.key).emails.list();
  assert.equal(restricted.error?.name, 'restricted_api_key');
  assert.equal((await new Resend(sender.key).emails.send({ ...base, to: 'a@example.net', text: 'x' })).error, null, 'a sending key sends');
  assert.equal((await resend.emails.get('email_01ARZ3NDEKTSV4RRFFQ69G5FAV')).error?.name, 'not_found');
  for (const [field, extra] of [['template', { template: { id: 'tpl_1' } }], ['topic_id', { topicId: 'topic_1' }]] as const) {
    const res = await resend.emails.send({ ...base, to: 'a@example.net', text: 'x', ...extra } as never);
    assert.equal(res.error?.name, 'validation_error', field);
    assert.match(res.error!.message, new RegExp(field));
  }
  const path = await resend.emails.send({ ...base, to: 'a@example.net', text: 'x', attachments: [{ filename: 'a.pdf', path: 'https://files.example/a.pdf' }] });
  assert.equal(path.error?.name, 'validation_error');
  assert.match(path.error!.message, /path/);
  const raw = await fetch(`${process.env.RESEND_BASE_URL}/emails`, { method: 'POST', body: '{"from":', headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant.key}` } });
  assert.equal(raw.status, 422);
  const body = (await raw.json()) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['message', 'name', 'statusCode']);
  assert.ok(!JSON.stringify(await (await ctx.call(undefined, '/openapi.json')).json()).includes('/resend'), 'not in the schema');
});

test('resend.webhooks.verify() accepts a delivery Mailroom sent', async () => {
  const { endpoint, secret } = await createEndpoint(ctx.sql, ctx.config, tenant.projectId, receiver.url('/resend-hook'));
  await emitEvent(ctx.sql, tenant.projectId);
  const [req] = await waitFor('the delivery', async () => {
    const got = receiver.requests.filter((r) => r.path === '/resend-hook');
    return got.length > 0 && got;
  });
  const payload = req!.body.toString('utf8');
  const headers = { id: String(req!.headers['webhook-id']), timestamp: String(req!.headers['webhook-timestamp']), signature: String(req!.headers['webhook-signature']) };
  const verified = resend.webhooks.verify({ payload, headers, webhookSecret: secret }) as unknown as { id: string; type: string };
  assert.equal(verified.id, JSON.parse(payload).id);
  assert.match(verified.type, /^email\./);
  assert.throws(() => resend.webhooks.verify({ payload: `${payload} `, headers, webhookSecret: secret }), 'a changed body is refused');
  assert.ok(endpoint.id);
  await worker.stop();
});
