import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectProvider } from '../../src/providers/connections.ts';
import { storeReceived } from '../../src/inbound/store.ts';
import { parseReceived } from '../../src/inbound/parse.ts';
import { newAttachmentId } from '../../src/inbound/ingest.ts';
import { downloadPath } from '../../src/inbound/links.ts';
import { DISABLED_VERDICTS } from '../../src/inbound/notification.ts';
import { Readable } from 'node:stream';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { startFakeS3 } from '../helpers/fake-s3.ts';
import { replyMessage } from './fixtures.ts';

const s3 = await startFakeS3();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_S3: s3.endpoint, EMAIL_MAX_MESSAGE_BYTES: String(64 * 1024) } });
const { sql, config } = ctx;

const post = (key: string, raw: Buffer | string, type = 'message/rfc822') =>
  ctx.app.request('/v1/sink/inbound', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': type }, body: typeof raw === 'string' ? raw : new Uint8Array(raw) });

const READ_FIELDS = ['id', 'from', 'to', 'cc', 'reply_to', 'received_for', 'subject', 'message_id', 'in_reply_to', 'references', 'html', 'text',
  'stripped_text', 'headers', 'attachments', 'raw', 'verdicts', 'is_auto_reply', 'is_bounce', 'in_reply_to_email_id', 'thread_id',
  'content_too_large', 'parse_failed', 'created_at'];

test('POST /v1/sink/inbound stores the message; the read has exactly the contract\'s fields', async () => {
  const t = await ctx.tenant();
  const { raw } = replyMessage({ to: 'Support <support@acme.test>', messageId: '<m1@mail.example.net>' });
  const res = await post(t.key, raw);
  assert.equal(res.status, 201);
  const created = await res.json() as Record<string, any>;
  const got = await ctx.call(t.key, `/v1/emails/receiving/${created.id}`);
  assert.equal(got.status, 200);
  const body = await got.json() as Record<string, any>;
  assert.deepEqual(Object.keys(body).sort(), [...READ_FIELDS].sort());
  assert.equal(body.from, 'Ann Example <ann@example.net>');
  assert.deepEqual(body.to, ['Support <support@acme.test>']);
  assert.deepEqual(body.received_for, ['support@acme.test']);
  assert.equal(body.message_id, '<m1@mail.example.net>');
  assert.equal(body.stripped_text, 'Yes, please ship it.');
  assert.deepEqual(body.verdicts, DISABLED_VERDICTS);
  assert.equal(body.thread_id, body.id, 'no known parent: its own thread');
  assert.equal(body.in_reply_to_email_id, null);
  assert.equal(body.content_too_large, false);
  assert.equal(body.headers['Message-ID'], '<m1@mail.example.net>');
  assert.deepEqual(Object.keys(body.attachments[0]).sort(), ['content_disposition', 'content_id', 'content_type', 'filename', 'id', 'size']);
  assert.equal(body.attachments[0].filename, 'invoice.pdf');

  // The same bytes posted again are the same message.
  const again = await post(t.key, raw);
  assert.equal(((await again.json()) as { id: string }).id, created.id);
  const [{ n }] = await sql<[{ n: number }]>`select count(*)::int as n from received_emails where project_id = ${t.projectId}`;
  assert.equal(n, 1);
});

test('download_url and raw.download_url work without a key and return the exact bytes; a forged or expired link does not', async () => {
  const t = await ctx.tenant();
  const { raw, pdf } = replyMessage({ to: 'support@acme.test', pdf: Buffer.from(Array.from({ length: 3000 }, (_, i) => i % 256)) });
  const created = await (await post(t.key, raw)).json() as { id: string; raw: { download_url: string; expires_at: string } };
  const rawRes = await ctx.app.request(new URL(created.raw.download_url).pathname);
  assert.equal(rawRes.status, 200);
  assert.equal(rawRes.headers.get('content-type'), 'message/rfc822');
  assert.deepEqual(Buffer.from(await rawRes.arrayBuffer()), raw);
  const expires = Date.parse(created.raw.expires_at) - Date.now();
  assert.ok(expires > 3500_000 && expires <= 3600_000, 'valid one hour');

  const list = await (await ctx.call(t.key, `/v1/emails/receiving/${created.id}/attachments`)).json() as { data: Record<string, any>[] };
  assert.equal(list.data.length, 1);
  const a = list.data[0]!;
  assert.deepEqual(Object.keys(a).sort(), ['content_disposition', 'content_id', 'content_type', 'download_url', 'expires_at', 'filename', 'id', 'size']);
  const one = await (await ctx.call(t.key, `/v1/emails/receiving/${created.id}/attachments/${a.id}`)).json() as Record<string, any>;
  assert.equal(one.id, a.id);
  const file = await ctx.app.request(new URL(a.download_url).pathname);
  assert.equal(file.status, 200);
  assert.equal(file.headers.get('content-type'), 'application/pdf');
  assert.match(file.headers.get('content-disposition') ?? '', /^attachment;/);
  assert.match(file.headers.get('content-security-policy') ?? '', /sandbox/);
  assert.deepEqual(Buffer.from(await file.arrayBuffer()), pdf);

  const path = new URL(a.download_url).pathname;
  const forged = path.replace(/.$/, (ch) => (ch === 'A' ? 'B' : 'A'));
  assert.equal((await ctx.app.request(forged)).status, 404);
  const expired = downloadPath(TEST_SECRET_KEY, { projectId: t.projectId, receivedId: created.id, part: 'raw' }, Date.now() - 3601_000).path;
  assert.equal((await ctx.app.request(expired)).status, 404);
  const other = await ctx.tenant();
  const wrongProject = downloadPath(TEST_SECRET_KEY, { projectId: other.projectId, receivedId: created.id, part: 'raw' }).path;
  assert.equal((await ctx.app.request(wrongProject)).status, 404);
});

test('an S3-delivered message\'s raw and attachments are fetched again from the bucket', async () => {
  const t = await ctx.tenant();
  // Connected (not a sink project), so its downloads read the bucket with the connection's keys.
  await connectProvider(sql, config, { projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret' });
  const { raw, pdf } = replyMessage({ to: 'support@acme.test' });
  s3.put('inbound-mail', 'mail/s3-read', raw);
  const parsed = await parseReceived(Readable.from([raw]), newAttachmentId);
  const [id] = await storeReceived(sql, [{ projectId: t.projectId, receivedFor: ['support@acme.test'] }], {
    sesMessageId: 'ses-s3-read', parsed, verdicts: DISABLED_VERDICTS, raw: null, s3: { bucket: 'inbound-mail', key: 'mail/s3-read' }, rawSize: raw.length, contentTooLarge: false,
  });
  const body = await (await ctx.call(t.key, `/v1/emails/receiving/${id}`)).json() as { raw: { download_url: string } };
  const before = s3.gets.length;
  const rawRes = await ctx.app.request(new URL(body.raw.download_url).pathname);
  assert.deepEqual(Buffer.from(await rawRes.arrayBuffer()), raw);
  assert.equal(s3.gets.length, before + 1);
  const list = await (await ctx.call(t.key, `/v1/emails/receiving/${id}/attachments`)).json() as { data: { download_url: string }[] };
  const file = await ctx.app.request(new URL(list.data[0]!.download_url).pathname);
  assert.deepEqual(Buffer.from(await file.arrayBuffer()), pdf);
});

test('a virus verdict fail keeps the email but serves no attachment and no raw', async () => {
  const t = await ctx.tenant();
  const { raw } = replyMessage({ to: 'support@acme.test' });
  const parsed = await parseReceived(Readable.from([raw]), newAttachmentId);
  const [id] = await storeReceived(sql, [{ projectId: t.projectId, receivedFor: ['support@acme.test'] }], {
    sesMessageId: 'ses-virus', parsed, verdicts: { ...DISABLED_VERDICTS, virus: 'fail' }, raw, s3: null, rawSize: raw.length, contentTooLarge: false,
  });
  const body = await (await ctx.call(t.key, `/v1/emails/receiving/${id}`)).json() as Record<string, any>;
  assert.equal(body.verdicts.virus, 'fail');
  assert.equal(body.raw.download_url, null);
  const list = await (await ctx.call(t.key, `/v1/emails/receiving/${id}/attachments`)).json() as { data: { download_url: string | null }[] };
  assert.equal(list.data[0]!.download_url, null);
  // A link made before (or forged with the key) serves nothing either.
  const link = downloadPath(TEST_SECRET_KEY, { projectId: t.projectId, receivedId: id!, part: 'raw' }).path;
  assert.equal((await ctx.app.request(link)).status, 404);
});

test('the list is newest first with limit and starting_after; another project sees nothing', async () => {
  const t = await ctx.tenant();
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) ids.push(((await (await post(t.key, replyMessage({ to: 'a@acme.test', subject: `n${i}` }).raw)).json()) as { id: string }).id);
  const page1 = await (await ctx.call(t.key, '/v1/emails/receiving?limit=2')).json() as { data: { id: string }[]; has_more: boolean };
  assert.deepEqual(page1.data.map((r) => r.id), [ids[2], ids[1]]);
  assert.equal(page1.has_more, true);
  const page2 = await (await ctx.call(t.key, `/v1/emails/receiving?limit=2&starting_after=${ids[1]}`)).json() as { data: { id: string }[]; has_more: boolean };
  assert.deepEqual(page2.data.map((r) => r.id), [ids[0]]);
  assert.equal(page2.has_more, false);

  const other = await ctx.tenant();
  assert.equal((await ctx.call(other.key, `/v1/emails/receiving/${ids[0]}`)).status, 404);
  assert.equal((await ctx.call(other.key, `/v1/emails/receiving?starting_after=${ids[0]}`)).status, 404);
  assert.deepEqual(((await (await ctx.call(other.key, '/v1/emails/receiving')).json()) as { data: unknown[] }).data, []);
  assert.equal((await ctx.call(t.key, '/v1/emails/receiving/rcv_nope')).status, 404);
  assert.equal((await ctx.call(t.key, '/v1/emails/receiving?limit=0')).status, 422);
});

test('POST /v1/sink/inbound refuses what it cannot take', async () => {
  const t = await ctx.tenant();
  assert.equal((await post(t.key, 'Subject: x\r\n\r\nhi', 'application/json')).status, 422);
  assert.equal((await post(t.key, '')).status, 422);
  assert.equal((await post(t.key, Buffer.alloc(65 * 1024, 'a'))).status, 413);
  assert.equal((await ctx.app.request('/v1/sink/inbound', { method: 'POST', headers: { 'content-type': 'message/rfc822' }, body: 'x' })).status, 401);
  const connected = await ctx.tenant();
  await connectProvider(sql, config, { projectId: connected.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret' });
  assert.equal((await post(connected.key, replyMessage({ to: 'a@acme.test' }).raw)).status, 403);
});
