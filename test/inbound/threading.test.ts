import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createTestContext } from '../helpers/app.ts';
import { sentEmail } from '../events/fixtures.ts';

const ctx = await createTestContext();
const { sql } = ctx;

/** A client's real reply from test/fixtures/inbound, its placeholders filled, with CRLF line ends. */
function fixture(name: string, fill: Record<string, string>) {
  let text = readFileSync(new URL(`../fixtures/inbound/${name}.eml`, import.meta.url), 'utf8');
  for (const [k, v] of Object.entries(fill)) text = text.replaceAll(`{{${k}}}`, v);
  return Buffer.from(text.replace(/\r?\n/g, '\r\n'));
}

async function receive(key: string, raw: Buffer) {
  const res = await ctx.app.request('/v1/sink/inbound', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'message/rfc822' }, body: new Uint8Array(raw) });
  assert.equal(res.status, 201, await res.clone().text());
  return res.json() as Promise<{ id: string; in_reply_to_email_id: string | null; thread_id: string; in_reply_to: string | null; references: string[]; stripped_text: string | null }>;
}

test('replies as Gmail, Outlook, Apple Mail (References only) and Thunderbird write them thread to the emails they answer', async () => {
  const t = await ctx.tenant();
  const first = await sentEmail(sql, t.projectId, ['ann.example@gmail.com']);

  // Gmail answers the Message-ID SES gave the sent email (SES rewrites Mailroom's own).
  const gmail = await receive(t.key, fixture('gmail', { PARENT_SES: first.providerMessageId }));
  assert.equal(gmail.in_reply_to_email_id, first.id);
  assert.equal(gmail.thread_id, first.id);
  assert.equal(gmail.stripped_text, 'Thanks! Could you send it to my office address instead?\n\nAnn');

  // The application answers the Gmail reply; Outlook answers that, from another SES region.
  const answer = await sentEmail(sql, t.projectId, ['bob@contoso.example']);
  await sql`update emails set headers = ${sql.json({ 'In-Reply-To': '<CAJx9Fk3u=q8mVZ0rT5dN2p+LhWQ3XbG7yK1oE6sR4aT9cH2vBw@mail.gmail.com>' })}
    where id = ${answer.id} and project_id = ${t.projectId}`;
  const outlook = await receive(t.key, fixture('outlook', { ROOT_SES: first.providerMessageId, PARENT_SES: answer.providerMessageId }));
  assert.equal(outlook.in_reply_to_email_id, answer.id);
  assert.equal(outlook.thread_id, first.id, 'the first email of the chain, through the received reply the answer cites');

  // iOS Mail sends References only.
  const apple = await receive(t.key, fixture('apple-mail-ios', { PARENT_SES: first.providerMessageId }));
  assert.equal(apple.in_reply_to, null);
  assert.equal(apple.in_reply_to_email_id, first.id);
  assert.equal(apple.thread_id, first.id);

  // Thunderbird answers a message that kept Mailroom's own Message-ID, after an unknown one in References.
  const own = await sentEmail(sql, t.projectId, ['dave@example.org']);
  const thunderbird = await receive(t.key, fixture('thunderbird', { PARENT_OWN: `${own.id}@acme.test` }));
  assert.equal(thunderbird.in_reply_to_email_id, own.id);
  assert.equal(thunderbird.thread_id, own.id);

  const sent = await (await ctx.call(t.key, `/v1/emails/${first.id}`)).json() as { replies: string[] };
  assert.deepEqual(sent.replies, [gmail.id, apple.id]);
  const sentAnswer = await (await ctx.call(t.key, `/v1/emails/${answer.id}`)).json() as { replies: string[] };
  assert.deepEqual(sentAnswer.replies, [outlook.id]);
});

test('a reply to a received email joins its thread; an unknown or another project\'s parent starts a new one', async () => {
  const t = await ctx.tenant();
  const other = await ctx.tenant();
  const theirs = await sentEmail(sql, other.projectId, ['ann.example@gmail.com']);
  const stray = await receive(t.key, fixture('gmail', { PARENT_SES: theirs.providerMessageId }));
  assert.equal(stray.in_reply_to_email_id, null);
  assert.equal(stray.thread_id, stray.id);

  const followUp = Buffer.from([
    'From: Ann Example <ann.example@gmail.com>', 'To: orders@acme.test', 'Subject: Re: Re: Your order',
    'Message-ID: <follow-up@mail.gmail.com>', 'In-Reply-To: <CAJx9Fk3u=q8mVZ0rT5dN2p+LhWQ3XbG7yK1oE6sR4aT9cH2vBw@mail.gmail.com>', '', 'And one more thing.', '',
  ].join('\r\n'));
  const next = await receive(t.key, followUp);
  assert.equal(next.in_reply_to_email_id, stray.id);
  assert.equal(next.thread_id, stray.id);
});
