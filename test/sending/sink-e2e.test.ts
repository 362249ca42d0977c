import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { SINK_SMTP_RESPONSE } from '../../src/emails/send.task.ts';
import { eventsOf, settled } from './fixtures.ts';

const ctx = await createTestContext({ env: { SINK_SMTP_PORT: '0' } });
const { projectId, key } = await ctx.tenant('sink project');
await startTestWorker(ctx.config, ctx.sql);

type SinkRow = {
  id: string; emailId: string | null; subject: string; html: string | null; text: string | null;
  toAddresses: string[]; ccAddresses: string[]; headers: Record<string, string>; raw: Buffer;
};

test('POST /v1/emails → worker → the sink over SMTP: sent, delivered, caught as composed, Bcc hidden', async () => {
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    body: {
      from: 'App <app@example.com>',
      to: 'ann@example.net',
      cc: ['Carl <carl@example.net>'],
      bcc: ['secret-watcher@example.net'],
      reply_to: 'help@example.com',
      subject: 'Welcome aboard',
      html: '<p>Hi <b>Ann</b></p>',
      text: 'Hi Ann',
      headers: { 'X-Entity-Ref-ID': 'abc-123' },
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id, status } = (await res.json()) as { id: string; status: string };
  assert.equal(status, 'queued');

  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent', state.lastError ?? '');
  assert.equal(state.attemptCount, 1);
  assert.match(state.providerMessageId ?? '', /^msg_/, 'the sink names the caught message');
  assert.ok(state.sentAt && state.deliveredAt);

  const [caught] = await ctx.sql<[SinkRow?]>`
    select id, email_id, subject, html, text, to_addresses, cc_addresses, headers, raw
    from sink_messages where project_id = ${projectId} and email_id = ${id}`;
  assert.ok(caught, 'the sink caught the message and linked it to the email');
  assert.equal(caught.id, state.providerMessageId);
  assert.equal(caught.subject, 'Welcome aboard');
  assert.equal(caught.html, '<p>Hi <b>Ann</b></p>');
  assert.equal(caught.text?.trim(), 'Hi Ann');
  assert.deepEqual(caught.toAddresses, ['ann@example.net']);
  assert.deepEqual(caught.ccAddresses, ['Carl <carl@example.net>']);
  assert.equal(caught.headers['X-Entity-Ref-ID'], 'abc-123');
  assert.ok(!Object.keys(caught.headers).some((h) => h.toLowerCase() === 'bcc'), 'no Bcc header');
  assert.doesNotMatch(caught.raw.toString(), /secret-watcher/, 'the bcc address travels only in the envelope');
  assert.match(caught.raw.toString(), new RegExp(`^Message-ID: <${id}@example\\.com>\\r$`, 'm'));
  assert.equal(caught.raw.toString().match(/^Message-ID:/gim)?.length, 1, 'the handoff adds no header of its own');

  const events = await eventsOf(ctx.sql, projectId, id);
  assert.deepEqual(events.map((e) => e.type), ['email.sent', 'email.delivered']);
  assert.deepEqual(events[0]!.data, { to: ['ann@example.net', 'Carl <carl@example.net>'], provider_message_id: state.providerMessageId, tags: [] });
  assert.deepEqual(events[1]!.data, { to: ['ann@example.net', 'Carl <carl@example.net>'], smtp_response: SINK_SMTP_RESPONSE, tags: [] });

  const read = (await (await ctx.call(key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.equal(read.status, 'sent');
  assert.equal(read.provider_message_id, state.providerMessageId);
  assert.equal(read.delivered_at, state.deliveredAt!.toISOString());
  assert.ok(!('bcc' in read));
});

test('the bcc recipient is in the SMTP envelope the sink received', async () => {
  // Sent to the bcc address alone besides a suppressed To: if the bcc were not in the envelope,
  // the email would fail as recipient_suppressed instead of reaching the sink.
  await ctx.sql`insert into suppressions (project_id, address, reason) values (${projectId}, 'gone@example.net', 'bounced')`;
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    body: { from: 'app@example.com', to: 'gone@example.net', bcc: 'only-bcc@example.net', subject: 'Bcc only', text: 'hi' },
  });
  const { id } = (await res.json()) as { id: string };
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent', state.lastError ?? '');
  const [caught] = await ctx.sql<[SinkRow?]>`
    select id, to_addresses, raw from sink_messages where project_id = ${projectId} and email_id = ${id}`;
  assert.ok(caught);
  assert.doesNotMatch(caught.raw.toString(), /only-bcc/);
});
