import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newId } from '../../src/platform/ids.ts';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();
const { sql } = ctx;

async function receive(key: string, lines: string[]) {
  const res = await ctx.app.request('/v1/sink/inbound', {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'message/rfc822' }, body: lines.join('\r\n'),
  });
  assert.equal(res.status, 201, await res.clone().text());
  return res.json() as Promise<Record<string, any>>;
}

const plain = (extra: string[], from = 'Ann <ann@example.net>') => [`From: ${from}`, 'To: support@acme.test', 'Subject: Hi', ...extra, '', 'Hello', ''];

test('is_auto_reply: Auto-Submitted other than no, X-Autoreply, Precedence auto_reply, bulk or junk', async () => {
  const t = await ctx.tenant();
  const cases: [string[], boolean][] = [
    [['Auto-Submitted: auto-replied'], true],
    [['Auto-Submitted: auto-generated'], true],
    [['Auto-Submitted: no'], false],
    [['X-Autoreply: yes'], true],
    [['Precedence: bulk'], true],
    [['Precedence: junk'], true],
    [['Precedence: auto_reply'], true],
    [['Precedence: list'], false],
    [[], false],
  ];
  for (const [headers, expected] of cases) {
    const r = await receive(t.key, plain([...headers, `Message-ID: <${newId('email')}@x.test>`]));
    assert.equal(r.is_auto_reply, expected, headers.join() || 'no header');
    assert.equal(r.is_bounce, false);
  }
});

test('is_bounce: a delivery status report, or mail from MAILER-DAEMON', async () => {
  const t = await ctx.tenant();
  const daemon = await receive(t.key, plain(['Message-ID: <b1@x.test>'], 'Mail Delivery System <MAILER-DAEMON@mx.example.net>'));
  assert.equal(daemon.is_bounce, true);
  const dsn = await receive(t.key, [
    'From: postmaster@example.net', 'To: support@acme.test', 'Subject: Undelivered Mail', 'Message-ID: <b2@x.test>', 'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="r"', '',
    '--r', 'Content-Type: text/plain', '', 'Your message could not be delivered.',
    '--r', 'Content-Type: message/delivery-status', '', 'Reporting-MTA: dns; mx.example.net', '', 'Final-Recipient: rfc822; bob@example.net', 'Action: failed', 'Status: 5.1.1',
    '--r--', '',
  ]);
  assert.equal(dsn.is_bounce, true);
});

test('email.received carries the read but raw and headers; past 256 KB without html, content_truncated', async () => {
  const t = await ctx.tenant();
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values (${newId('webhook')}, ${t.projectId}, 'https://hooks.example.test/h', ${Buffer.from('x')})`;
  const small = await receive(t.key, plain(['Message-ID: <s@x.test>']));
  const big = await receive(t.key, [
    'From: Ann <ann@example.net>', 'To: support@acme.test', 'Subject: Big', 'Message-ID: <big@x.test>', 'MIME-Version: 1.0',
    'Content-Type: multipart/alternative; boundary="a"', '', '--a', 'Content-Type: text/plain', '', 'Short text.',
    '--a', 'Content-Type: text/html', '', `<p>${'x'.repeat(300 * 1024)}</p>`, '--a--', '',
  ]);
  assert.equal(big.html.length > 300 * 1024, true, 'the read keeps the whole html');
  const data = async (id: string) => {
    const [e] = await sql`select data from events where project_id = ${t.projectId} and email_id = ${id} and type = 'email.received'`;
    return e!.data as Record<string, any>;
  };
  const s = await data(small.id);
  for (const field of ['id', 'from', 'to', 'cc', 'reply_to', 'received_for', 'subject', 'message_id', 'in_reply_to', 'references', 'html', 'text',
    'stripped_text', 'attachments', 'verdicts', 'is_auto_reply', 'is_bounce', 'in_reply_to_email_id', 'thread_id', 'content_too_large', 'parse_failed', 'created_at']) {
    assert.ok(field in s, field);
  }
  assert.equal('raw' in s, false);
  assert.equal('headers' in s, false);
  assert.equal(s.content_truncated, false);
  const b = await data(big.id);
  assert.equal(b.html, null);
  assert.equal(b.text, 'Short text.');
  assert.equal(b.content_truncated, true);
  assert.ok(Buffer.byteLength(JSON.stringify(b)) <= 256 * 1024);
  const deliveries = await sql`select 1 from webhook_deliveries where project_id = ${t.projectId}`;
  assert.equal(deliveries.length, 2);
});
