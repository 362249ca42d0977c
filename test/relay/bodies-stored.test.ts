import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestWorker } from '../helpers/worker.ts';
import { settled } from '../sending/fixtures.ts';
import { SmtpSession, emailIdOf, multipartMessage, startTestRelay } from './setup.ts';

// A relayed email's text and html are read from its message by the worker, once, and stored with
// its outcome: from then on no read parses the message.
const ctx = await startTestRelay();
await startTestWorker(ctx.config, ctx.sql);
const alpha = await ctx.tenant('alpha');

const multipart = (to: string) => multipartMessage({ From: 'App <app@example.com>', To: to, Subject: 'Stored bodies' });

async function submit(raw: string, to: string) {
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(alpha.key), /^235 /);
  const reply = await s.send('app@example.com', [to], raw);
  s.close();
  const id = emailIdOf(reply);
  assert.ok(id, reply);
  return id;
}

const storedBodies = async (id: string) => (await ctx.sql<[{ text: string | null; html: string | null }]>`
  select text, html from emails where id = ${id} and project_id = ${alpha.projectId}`)[0];

test('once sent, a relayed email holds its text and html, and reads show them without the message', async () => {
  const id = await submit(multipart('ann@example.net'), 'ann@example.net');
  assert.equal((await settled(ctx.sql, alpha.projectId, id)).status, 'sent');
  assert.deepEqual({ ...(await storedBodies(id)) }, { text: 'Grüße, Ann.', html: '<p>Grüße, <b>Ann</b>.</p>' });

  // A stored message no parser could read: the reads no longer touch it.
  await ctx.sql`update emails set raw_message = ${Buffer.from('not a message')} where id = ${id} and project_id = ${alpha.projectId}`;
  const v1 = (await (await ctx.call(alpha.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.deepEqual({ text: v1.text, html: v1.html }, { text: 'Grüße, Ann.', html: '<p>Grüße, <b>Ann</b>.</p>' });
  const list = (await (await ctx.call(alpha.key, '/resend/emails')).json()) as { data: Array<Record<string, unknown>> };
  assert.equal(list.data.find((e) => e.id === id)?.text, 'Grüße, Ann.');
});

test('a relayed email that fails holds its bodies too', async () => {
  await ctx.sql`insert into suppressions (project_id, address, reason) values (${alpha.projectId}, 'gone@example.net', 'bounced')`;
  const id = await submit(multipart('gone@example.net'), 'gone@example.net');
  const state = await settled(ctx.sql, alpha.projectId, id);
  assert.equal(state.status, 'failed');
  assert.deepEqual({ ...(await storedBodies(id)) }, { text: 'Grüße, Ann.', html: '<p>Grüße, <b>Ann</b>.</p>' });
});
