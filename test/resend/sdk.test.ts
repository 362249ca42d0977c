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
  for (const [field, extra] of [['topic_id', { topicId: 'topic_1' }]] as const) {
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

test('templates.create, get, list, update, publish, duplicate and remove in Resend\'s shapes', async () => {
  const created = await resend.templates.create({
    name: 'Order shipped', alias: 'order-shipped', subject: 'Order {{{ORDER}}} shipped', from: 'Shop <shop@acme.test>',
    html: '<p>Hi {{NAME}}, order {{ORDER}} is on its way.</p>', text: 'Hi {{NAME}}', replyTo: 'help@acme.test',
    variables: [{ key: 'NAME', type: 'string', fallbackValue: 'there' }, { key: 'ORDER', type: 'number' }],
  });
  assert.equal(created.error, null, JSON.stringify(created.error));
  assert.equal(created.data!.object, 'template');
  assert.match(created.data!.id, /^tmpl_/);
  const id = created.data!.id;

  const got = await resend.templates.get('order-shipped');
  assert.equal(got.error, null);
  const t = got.data!;
  assert.equal(t.object, 'template');
  assert.equal(t.id, id);
  assert.equal(t.status, 'draft');
  assert.equal(t.alias, 'order-shipped');
  assert.equal(t.from, 'Shop <shop@acme.test>');
  assert.deepEqual(t.reply_to, ['help@acme.test']);
  assert.deepEqual(t.variables!.map((v) => [v.key, v.type, v.fallback_value]), [['NAME', 'string', 'there'], ['ORDER', 'number', null]]);
  assert.equal(t.has_unpublished_versions, false);
  assert.match(t.current_version_id, /^tmplv_/);

  const refused = await resend.templates.create({ name: 'Bad', html: '<p>{{UNDECLARED}}</p>' });
  assert.equal(refused.error?.name, 'validation_error');
  assert.match(refused.error!.message, /UNDECLARED/);

  const published = await resend.templates.publish(id);
  assert.deepEqual(published.data, { object: 'template', id });
  assert.equal((await resend.templates.get(id)).data!.status, 'published');

  const updated = await resend.templates.update(id, { subject: 'Order {{{ORDER}}} left the warehouse' });
  assert.deepEqual(updated.data, { object: 'template', id });
  const draft = (await resend.templates.get(id)).data!;
  assert.equal(draft.has_unpublished_versions, true);
  assert.notEqual(draft.current_version_id, t.current_version_id, 'an edit after a publish starts a new version');

  const copy = await resend.templates.duplicate(id);
  assert.equal(copy.error, null);
  assert.notEqual(copy.data!.id, id);
  const copied = (await resend.templates.get(copy.data!.id)).data!;
  assert.equal(copied.status, 'draft');
  assert.equal(copied.alias, null);
  assert.equal(copied.subject, 'Order {{{ORDER}}} left the warehouse');
  // The SDK's chained form: create, then publish the result.
  const chained = await resend.templates.create({ name: 'Chained', html: '<p>x</p>' }).publish();
  assert.equal(chained.error, null);
  assert.equal((await resend.templates.get(chained.data!.id)).data!.status, 'published');

  const page = await resend.templates.list({ limit: 2 });
  assert.equal(page.error, null);
  assert.equal(page.data!.object, 'list');
  assert.deepEqual(page.data!.data.map((x) => x.id), [chained.data!.id, copy.data!.id]);
  assert.equal(page.data!.has_more, true);
  const older = await resend.templates.list({ limit: 2, after: copy.data!.id });
  assert.ok(older.data!.data.some((x) => x.id === id));

  const removed = await resend.templates.remove(copy.data!.id);
  assert.deepEqual(removed.data, { object: 'template', id: copy.data!.id, deleted: true });
  assert.equal((await resend.templates.get(copy.data!.id)).error?.name, 'not_found');
  const sender = await createApiKey(ctx.sql, tenant.projectId, 'template sender', 'sending');
  assert.equal((await new Resend(sender.key).templates.list()).error?.name, 'restricted_api_key');
});

test('emails.send({ template }) renders the published version, and the sink catches the rendered message', async () => {
  const { data: made } = await resend.templates.create({
    name: 'Receipt', alias: 'receipt', subject: 'Receipt {{NUMBER}}', from: 'Billing <billing@acme.test>',
    html: '<h1>Thanks {{NAME}}</h1><p>{{NOTE}}</p>', text: 'Thanks {{NAME}}: {{NOTE}}',
    variables: [{ key: 'NAME', type: 'string' }, { key: 'NUMBER', type: 'number' }, { key: 'NOTE', type: 'string', fallbackValue: 'none' }],
  });
  const unpublished = await resend.emails.send({ to: 'ann@example.net', template: { id: 'receipt', variables: { NAME: 'Ann', NUMBER: 1 } } });
  assert.equal(unpublished.error?.name, 'validation_error');
  await resend.templates.publish(made!.id);

  const { data, error } = await resend.emails.send({ to: 'ann@example.net', template: { id: 'receipt', variables: { NAME: '<b>Ann</b>&"', NUMBER: 42 } } });
  assert.equal(error, null, JSON.stringify(error));
  const [caught] = await waitFor('the sink to catch the templated email', async () => {
    const rows = await ctx.sql<{ raw: Buffer }[]>`select raw from sink_messages where email_id = ${data!.id}`;
    return rows.length === 1 && rows;
  });
  const parsed = await simpleParser(caught!.raw);
  assert.equal(parsed.subject, 'Receipt 42');
  assert.equal(parsed.from?.text, '"Billing" <billing@acme.test>');
  assert.equal(parsed.html, '<h1>Thanks &lt;b&gt;Ann&lt;/b&gt;&amp;&quot;</h1><p>none</p>');
  assert.equal(parsed.text?.trim(), 'Thanks <b>Ann</b>&": none');

  const got = (await resend.emails.get(data!.id)).data!;
  assert.equal(got.subject, 'Receipt 42');
  const v1 = (await ctx.call(tenant.key, `/v1/emails/${data!.id}`).then((r) => r.json())) as { template: unknown };
  assert.deepEqual(v1.template, { id: made!.id, version: 1 });

  const overridden = await resend.emails.send({ from: 'Other <other@acme.test>', subject: 'Override', to: 'ann@example.net', template: { id: made!.id, variables: { NAME: 'Bo', NUMBER: 2 } } });
  const shown = (await resend.emails.get(overridden.data!.id)).data!;
  assert.equal(shown.subject, 'Override');
  assert.equal(shown.from, 'Other <other@acme.test>');
  const mistyped = await resend.emails.send({ to: 'ann@example.net', template: { id: 'receipt', variables: { NAME: 'Ann', NUMBER: 'forty-two' } } });
  assert.equal(mistyped.error?.name, 'validation_error');
  assert.match(mistyped.error!.message, /template\.variables\.NUMBER/);
  const both = await resend.emails.send({ to: 'ann@example.net', html: '<p>x</p>', template: { id: 'receipt', variables: { NAME: 'A', NUMBER: 1 } } } as never);
  assert.equal(both.error?.name, 'validation_error');

  const batch = await resend.batch.send([
    { to: 'b1@example.net', template: { id: 'receipt', variables: { NAME: 'B1', NUMBER: 1 } } },
    { from: 'Acme <app@acme.test>', to: 'b2@example.net', subject: 'plain', text: 'plain' },
  ]);
  assert.equal(batch.error, null, JSON.stringify(batch.error));
  assert.equal((await resend.emails.get(batch.data!.data[0]!.id)).data!.subject, 'Receipt 1');
  const permissive = await resend.batch.send(
    [{ to: 'p1@example.net', template: { id: 'receipt', variables: { NAME: 'P1', NUMBER: 1 } } }, { to: 'p2@example.net', template: { id: 'receipt', variables: {} } }],
    { batchValidation: 'permissive' },
  );
  assert.equal(permissive.data!.data.length, 1);
  assert.deepEqual((permissive.data as unknown as { errors: { index: number }[] }).errors.map((e) => e.index), [1]);
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
