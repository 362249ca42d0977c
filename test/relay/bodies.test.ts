import { test } from 'node:test';
import assert from 'node:assert/strict';
import { browser, signIn } from '../dashboard/client.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { settled } from '../sending/fixtures.ts';
import { SmtpSession, emailIdOf, message, multipartMessage, startTestRelay } from './setup.ts';

// The relay's acceptance reads only the header section. The worker reads the text and html once,
// as the email is sent (in the MIME pool), and keeps them in the email's columns; no read parses
// the message, so until then the bodies show as null.
const ctx = await startTestRelay();
const alpha = await ctx.tenant('alpha');

const multipart = multipartMessage({
  From: 'App <app@example.com>',
  To: 'ann@example.net',
  Subject: '=?UTF-8?Q?Gr=C3=BC=C3=9Fe_from_the_relay?=',
});

async function submit(raw: string) {
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(alpha.key), /^235 /);
  const reply = await s.send('app@example.com', ['ann@example.net'], raw);
  s.close();
  const id = emailIdOf(reply);
  assert.ok(id, reply);
  return id;
}

test('a relayed email shows its decoded subject at once, and its text and html through /v1, /resend and the dashboard once sent', async () => {
  const id = await submit(multipart);
  const [accepted] = await ctx.sql`select subject, text, html from emails where id = ${id}`;
  assert.deepEqual({ ...accepted }, { subject: 'Grüße from the relay', text: null, html: null }, 'acceptance reads the header section only');
  const early = (await (await ctx.call(alpha.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.deepEqual({ subject: early.subject, text: early.text, html: early.html }, { subject: 'Grüße from the relay', text: null, html: null }, 'a read never parses the message');

  const worker = await startTestWorker(ctx.config, ctx.sql);
  try {
    assert.equal((await settled(ctx.sql, alpha.projectId, id)).status, 'sent');
  } finally {
    await worker.stop();
  }
  const [row] = await ctx.sql`select subject, text, html from emails where id = ${id}`;
  assert.deepEqual({ ...row }, { subject: 'Grüße from the relay', text: 'Grüße, Ann.', html: '<p>Grüße, <b>Ann</b>.</p>' }, 'bodies read by the worker and kept');
  // A stored message no parser could read: the reads no longer touch it.
  await ctx.sql`update emails set raw_message = ${Buffer.from('not a message')} where id = ${id} and project_id = ${alpha.projectId}`;

  const v1 = (await (await ctx.call(alpha.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.deepEqual({ subject: v1.subject, text: v1.text, html: v1.html }, { subject: 'Grüße from the relay', text: 'Grüße, Ann.', html: '<p>Grüße, <b>Ann</b>.</p>' });

  const one = (await (await ctx.call(alpha.key, `/resend/emails/${id}`)).json()) as Record<string, unknown>;
  assert.deepEqual({ text: one.text, html: one.html }, { text: 'Grüße, Ann.', html: '<p>Grüße, <b>Ann</b>.</p>' });
  const list = (await (await ctx.call(alpha.key, '/resend/emails')).json()) as { data: Array<Record<string, unknown>> };
  assert.equal(list.data.find((e) => e.id === id)?.html, '<p>Grüße, <b>Ann</b>.</p>');

  const b = browser(ctx);
  await signIn(b);
  const page = await b.get(`/dashboard/projects/${alpha.projectId}/emails/${id}`);
  assert.equal(page.res.status, 200);
  assert.match(page.text, /Grüße, Ann\./);
  assert.match(page.text, /Grüße from the relay/);
});

test('a relayed message with no text part shows text null; purged bodies stay purged', async () => {
  const id = await submit(message({ From: 'app@example.com', To: 'ann@example.net', Subject: 'html only', 'Content-Type': 'text/html; charset=us-ascii' }, '<p>only html</p>'));
  const worker = await startTestWorker(ctx.config, ctx.sql);
  try {
    assert.equal((await settled(ctx.sql, alpha.projectId, id)).status, 'sent');
  } finally {
    await worker.stop();
  }
  const v1 = (await (await ctx.call(alpha.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.deepEqual({ text: v1.text, html: v1.html }, { text: null, html: '<p>only html</p>\n' });

  await ctx.sql`update emails set html = null, text = null, raw_message = null, body_purged = true where id = ${id} and project_id = ${alpha.projectId}`;
  const purged = (await (await ctx.call(alpha.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.deepEqual({ text: purged.text, html: purged.html, body_purged: purged.body_purged }, { text: null, html: null, body_purged: true });
});
