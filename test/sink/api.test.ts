import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { caughtId, smtpClient, smtpDialog, startSink } from './helpers.ts';

const KEEP = 4;
const ctx = await createTestContext({ env: { SINK_SMTP_PORT: '0', SINK_MAX_MESSAGES: String(KEEP) } });
const sink = await startSink(ctx);

async function send(key: string, subject: string) {
  const info = await smtpClient(sink.port, { user: 'app', pass: key }).sendMail({
    from: 'a@example.com', to: 'b@example.com', subject, text: subject,
  });
  return caughtId(info.response);
}

const subjects = (page: { data: { subject: string }[] }) => page.data.map((m) => m.subject);

test('lists newest first with limit and starting_after, like GET /v1/emails', async () => {
  const { key } = await ctx.tenant();
  const ids = [];
  for (const s of ['one', 'two', 'three', 'four']) ids.push(await send(key, s));

  const first = await (await ctx.call(key, '/v1/sink/messages?limit=3')).json();
  assert.deepEqual(subjects(first), ['four', 'three', 'two']);
  assert.equal(first.has_more, true);
  assert.deepEqual(Object.keys(first.data[0]).sort(), ['cc', 'email_id', 'from', 'id', 'received_at', 'size_bytes', 'subject', 'to']);

  const second = await (await ctx.call(key, `/v1/sink/messages?limit=3&starting_after=${first.data[2].id}`)).json();
  assert.deepEqual(subjects(second), ['one']);
  assert.equal(second.has_more, false);
  assert.equal(second.data[0].id, ids[0]);

  const all = await (await ctx.call(key, '/v1/sink/messages')).json();
  assert.equal(all.data.length, 4);
});

test('a cursor that is not a message of the project answers 404; a bad limit 422', async () => {
  const a = await ctx.tenant();
  const b = await ctx.tenant();
  const foreign = await send(b.key, 'b only');
  for (const cursor of ['msg_01ARZ3NDEKTSV4RRFFQ69G5FAV', foreign]) {
    const res = await ctx.call(a.key, `/v1/sink/messages?starting_after=${cursor}`);
    assert.equal(res.status, 404);
    assert.equal((await res.json()).error.type, 'not_found');
  }
  for (const limit of ['0', '101', 'x']) {
    const res = await ctx.call(a.key, `/v1/sink/messages?limit=${limit}`);
    assert.equal(res.status, 422);
    assert.deepEqual((await res.json()).detail[0].loc, ['query', 'limit']);
  }
});

test(`keeps only SINK_MAX_MESSAGES (${KEEP}) per project, pruning the oldest`, async () => {
  const a = await ctx.tenant();
  const b = await ctx.tenant();
  await send(b.key, 'b keeps this');
  const ids = [];
  for (let i = 1; i <= 7; i++) ids.push(await send(a.key, `m${i}`));
  const page = await (await ctx.call(a.key, '/v1/sink/messages')).json();
  assert.deepEqual(subjects(page), ['m7', 'm6', 'm5', 'm4']);
  assert.equal((await ctx.call(a.key, `/v1/sink/messages/${ids[0]}`)).status, 404);
  // Concurrent deliveries prune in turn, never leaving more than the limit behind.
  await Promise.all(Array.from({ length: 12 }, (_, i) => send(a.key, `c${i}`)));
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from sink_messages where project_id = ${a.projectId}`;
  assert.equal(n, KEEP);
  // Another project's sink is untouched by the pruning.
  assert.deepEqual(subjects(await (await ctx.call(b.key, '/v1/sink/messages')).json()), ['b keeps this']);
});

test('projects are isolated: list, retrieve and delete see only their own messages', async () => {
  const a = await ctx.tenant();
  const b = await ctx.tenant();
  const aId = await send(a.key, 'for a');
  await send(b.key, 'for b');

  assert.deepEqual(subjects(await (await ctx.call(b.key, '/v1/sink/messages')).json()), ['for b']);
  const foreign = await ctx.call(b.key, `/v1/sink/messages/${aId}`);
  assert.equal(foreign.status, 404);
  assert.deepEqual(await foreign.json(), { error: { type: 'not_found', message: 'Sink message not found.' } });

  const del = await ctx.call(b.key, '/v1/sink/messages', { method: 'DELETE' });
  assert.equal(del.status, 204);
  assert.equal(await del.text(), '');
  assert.deepEqual((await (await ctx.call(b.key, '/v1/sink/messages')).json()).data, []);
  assert.equal((await ctx.call(a.key, `/v1/sink/messages/${aId}`)).status, 200, 'B emptying its sink leaves A alone');

  assert.equal((await ctx.call(a.key, '/v1/sink/messages', { method: 'DELETE' })).status, 204);
  assert.equal((await ctx.call(a.key, `/v1/sink/messages/${aId}`)).status, 404);
});

test('the sink API needs a key', async () => {
  for (const [method, path] of [['GET', '/v1/sink/messages'], ['GET', '/v1/sink/messages/msg_x'], ['DELETE', '/v1/sink/messages']] as const) {
    const res = await ctx.call(undefined, path, { method });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error.type, 'authentication_failed');
  }
});

test('headers keep their spelling, are unfolded, and repeated ones are joined', async () => {
  const { key } = await ctx.tenant();
  const s = await smtpDialog(sink.port);
  await s.send('EHLO client.test');
  await s.send(`AUTH PLAIN ${Buffer.from(`\0u\0${key}`).toString('base64')}`);
  await s.send('MAIL FROM:<a@example.com>');
  await s.send('RCPT TO:<b@example.com>');
  await s.send('DATA');
  const reply = await s.send([
    'From: "Doe, Jane" <jane@example.com>',
    'To: Team: x@example.com, y@example.com;',
    'Subject: =?UTF-8?B?w7xiZXI=?=',
    'X-Trace: first',
    'x-trace: second',
    'X-Long: part one',
    '\tpart two',
    '',
    'hi',
    '.',
  ].join('\r\n'));
  s.close();
  const msg = await (await ctx.call(key, `/v1/sink/messages/${caughtId(reply.text)}`)).json();
  assert.equal(msg.headers['X-Trace'], 'first\nsecond');
  assert.equal(msg.headers['X-Long'], 'part one\tpart two');
  assert.equal(msg.headers.Subject, '=?UTF-8?B?w7xiZXI=?=');
  assert.equal(msg.subject, 'über');
  assert.equal(msg.from, '"Doe, Jane" <jane@example.com>');
  assert.deepEqual(msg.to, ['x@example.com', 'y@example.com']);
});

test('the routes are in the OpenAPI document with their error shapes', async () => {
  const doc = await (await ctx.call(undefined, '/openapi.json')).json();
  const list = doc.paths['/v1/sink/messages'];
  assert.ok(list.get.responses['200'] && list.get.responses['404'] && list.get.responses['422']);
  assert.ok(list.delete.responses['204'] && list.delete.responses['401']);
  assert.ok(doc.paths['/v1/sink/messages/{message_id}'].get.responses['404']);
  const detail = JSON.stringify(doc.components.schemas.SinkMessageResponse);
  for (const field of ['text', 'html', 'headers', 'attachments', 'raw']) assert.match(detail, new RegExp(`"${field}":`));
});
