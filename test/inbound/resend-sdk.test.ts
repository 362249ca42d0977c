import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Resend } from 'resend';
import { createTestContext } from '../helpers/app.ts';
import { replyMessage } from './fixtures.ts';

const ctx = await createTestContext();
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
// The SDK is configured only through RESEND_BASE_URL, as an application switching would be.
process.env.RESEND_BASE_URL = `${origin}/resend`;

const tenant = await ctx.tenant();
const resend = new Resend(tenant.key);

async function receive(subject: string) {
  const { raw, pdf } = replyMessage({ to: 'Support <support@acme.test>', subject });
  const res = await fetch(`${origin}/v1/sink/inbound`, { method: 'POST', headers: { authorization: `Bearer ${tenant.key}`, 'content-type': 'message/rfc822' }, body: new Uint8Array(raw) });
  assert.equal(res.status, 201);
  return { id: ((await res.json()) as { id: string }).id, raw, pdf };
}

test('resend.emails.receiving.get/list and .attachments.get/list work unchanged against /resend', async () => {
  const first = await receive('First');
  const second = await receive('Second');

  const got = await resend.emails.receiving.get(first.id);
  assert.equal(got.error, null);
  assert.equal(got.data!.object, 'email');
  assert.equal(got.data!.id, first.id);
  assert.equal(got.data!.subject, 'First');
  assert.equal(got.data!.from, 'Ann Example <ann@example.net>');
  assert.deepEqual(got.data!.received_for, ['support@acme.test']);
  assert.equal(got.data!.text?.startsWith('Yes, please ship it.'), true);
  assert.equal(got.data!.attachments[0]!.filename, 'invoice.pdf');
  const raw = await fetch(got.data!.raw!.download_url);
  assert.deepEqual(Buffer.from(await raw.arrayBuffer()), first.raw);

  const list = await resend.emails.receiving.list({ limit: 1 });
  assert.equal(list.error, null);
  assert.equal(list.data!.object, 'list');
  assert.deepEqual(list.data!.data.map((e) => e.id), [second.id]);
  assert.equal(list.data!.has_more, true);
  assert.equal('html' in list.data!.data[0]!, false);
  const next = await resend.emails.receiving.list({ limit: 1, after: second.id });
  assert.deepEqual(next.data!.data.map((e) => e.id), [first.id]);

  const attachments = await resend.emails.receiving.attachments.list({ emailId: first.id });
  assert.equal(attachments.error, null);
  assert.equal(attachments.data!.object, 'list');
  const a = attachments.data!.data[0]!;
  assert.equal(a.filename, 'invoice.pdf');
  assert.equal(a.content_disposition, 'attachment');
  const one = await resend.emails.receiving.attachments.get({ emailId: first.id, id: a.id });
  assert.equal(one.error, null);
  assert.equal(one.data!.object, 'attachment');
  const file = await fetch(one.data!.download_url);
  assert.deepEqual(Buffer.from(await file.arrayBuffer()), first.pdf);

  const missing = await resend.emails.receiving.get('rcv_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z');
  assert.equal(missing.error?.name, 'not_found');
});
