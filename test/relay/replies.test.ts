import { test } from 'node:test';
import assert from 'node:assert/strict';
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { SmtpSession, emailIdOf, message, startTestRelay } from './setup.ts';
import { MemoryRateLimiter } from '../../src/http/rate-limit.ts';
import { registry } from '../../src/platform/metrics.ts';
import { recordSocketWrites } from '../helpers/socket-writes.ts';

// Exact replies over a raw socket, in production mode (NODE_ENV unset). The limiter is the one
// the in-process API uses too.
const limiter = new MemoryRateLimiter();
const ctx = await startTestRelay({ limiter, env: { EMAIL_MAX_MESSAGE_BYTES: '65536' } });
const alpha = await ctx.tenant('alpha');
const msg = (extra: Record<string, string> = {}, body?: string) =>
  message({ From: 'App <app@example.com>', To: 'ann@example.net', Subject: 'Hello', ...extra }, body);

async function session(key = alpha.key) {
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(key), /^235 /);
  return s;
}

const emailCount = async (projectId: string) => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`)[0].n;

async function submissions(outcome: string) {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'mailroom_smtp_submissions_total');
  return (metric?.values.find((v) => v.labels.outcome === outcome)?.value as number | undefined) ?? 0;
}

test('EHLO advertises STARTTLS, ENHANCEDSTATUSCODES and SIZE as EMAIL_MAX_MESSAGE_BYTES; AUTH PLAIN LOGIN after TLS', async () => {
  const s = await SmtpSession.open(ctx.port);
  const ehlo = await s.command('EHLO client.test');
  assert.match(ehlo, /STARTTLS/);
  assert.match(ehlo, /SIZE 65536/);
  assert.match(ehlo, /ENHANCEDSTATUSCODES/);
  await s.startTls();
  assert.match(await s.command('EHLO client.test'), /AUTH PLAIN LOGIN/);
  s.close();
});

test('AUTH before TLS answers 538 5.7.11 in production; MAIL FROM before AUTH 530 5.7.0', async () => {
  const s = await SmtpSession.open(ctx.port);
  await s.command('EHLO client.test');
  assert.match(await s.auth(alpha.key), /^538 5\.7\.11 /);
  assert.match(await s.command('AUTH LOGIN'), /^538 5\.7\.11 /);
  assert.match(await s.command('MAIL FROM:<app@example.com>'), /^530 5\.7\.0 /);
  s.close();
});

test('a wrong key answers 535 5.7.8; AUTH LOGIN with the key works, any username', async () => {
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  const before = await submissions('auth_failed');
  assert.match(await s.auth(`sk_${'A'.repeat(43)}`), /^535 5\.7\.8 /);
  assert.equal(await submissions('auth_failed'), before + 1);
  assert.match(await s.command('AUTH LOGIN'), /^334 /);
  assert.match(await s.command(Buffer.from('whoever').toString('base64')), /^334 /);
  assert.match(await s.command(Buffer.from(alpha.key).toString('base64')), /^235 /);
  s.close();
});

test('a message answers 250 2.0.0 OK queued as <id> once its email is committed, source smtp', async () => {
  const s = await session();
  const before = await submissions('accepted');
  const reply = await s.send('app@example.com', ['ann@example.net', 'cc@example.net', 'hidden@example.net'], msg({ Cc: 'Carol <cc@example.net>', 'Reply-To': 'help@example.com' }));
  assert.match(reply, /^250 2\.0\.0 OK queued as email_[0-9A-HJKMNP-TV-Z]{26}$/);
  const id = emailIdOf(reply)!;
  const [row] = await ctx.sql`select status, source, project_id, to_addresses, cc_addresses, bcc_addresses, from_address, subject, raw_message is not null as has_raw from emails where id = ${id}`;
  assert.deepEqual({ ...row }, {
    status: 'queued', source: 'smtp', projectId: alpha.projectId, toAddresses: ['ann@example.net'], ccAddresses: ['cc@example.net'],
    bccAddresses: ['hidden@example.net'], fromAddress: 'App <app@example.com>', subject: 'Hello', hasRaw: true,
  });
  const [job] = await ctx.sql`select 1 from graphile_worker.jobs where key = ${id} and task_identifier = 'email__send'`;
  assert.ok(job, 'queued with its job in the same commit');
  assert.equal(await submissions('accepted'), before + 1);

  const read = (await (await ctx.call(alpha.key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.equal(read.source, 'smtp');
  assert.equal(read.text, null, 'the worker reads the bodies as it sends (bodies.test.ts); acceptance reads the header section only');
  assert.deepEqual(read.reply_to, ['help@example.com']);
  assert.equal(read.bcc, undefined);
  const api = await ctx.call(alpha.key, '/v1/emails', { method: 'POST', body: { from: 'app@example.com', to: 'ann@example.net', subject: 'x', text: 'y' } });
  const apiId = ((await api.json()) as { id: string }).id;
  assert.equal(((await (await ctx.call(alpha.key, `/v1/emails/${apiId}`)).json()) as { source: string }).source, 'api');
  s.close();
});

test('the 51st RCPT TO answers 452 4.5.3 and the message goes to the first 50', async () => {
  const s = await session();
  assert.match(await s.command('MAIL FROM:<app@example.com>'), /^250 /);
  for (let i = 1; i <= 50; i++) assert.match(await s.command(`RCPT TO:<r${i}@example.net>`), /^250 /);
  assert.match(await s.command('RCPT TO:<r51@example.net>'), /^452 4\.5\.3 /);
  assert.match(await s.command('DATA'), /^354 /);
  const reply = await s.command(`${msg({ To: 'r1@example.net' })}.\r\n`);
  const [row] = await ctx.sql`select cardinality(to_addresses) + cardinality(bcc_addresses) as n from emails where id = ${emailIdOf(reply)!}`;
  assert.equal(row!.n, 50);
  s.close();
});

test('a message over EMAIL_MAX_MESSAGE_BYTES answers 552 5.3.4 and nothing is stored; so does a SIZE= over it', async () => {
  const s = await session();
  const before = await emailCount(alpha.projectId);
  assert.match(await s.send('app@example.com', ['ann@example.net'], msg({}, 'x'.repeat(900) + '\r\n'.repeat(1) + ('y'.repeat(900) + '\r\n').repeat(80))), /^552 5\.3\.4 /);
  assert.equal(await emailCount(alpha.projectId), before);
  assert.match(await s.command('MAIL FROM:<app@example.com> SIZE=70000'), /^552 5\.3\.4 /);
  // The connection stays usable.
  assert.match(await s.send('app@example.com', ['ann@example.net'], msg()), /^250 2\.0\.0 /);
  s.close();
});

test('a repeated Message-ID within 24 h answers the first email\'s id and stores nothing; an older one is a new email', async () => {
  const s = await session();
  const withId = msg({ 'Message-ID': '<retry-1@app.example.com>' });
  const first = emailIdOf(await s.send('app@example.com', ['ann@example.net'], withId))!;
  const before = await emailCount(alpha.projectId);
  const again = await s.send('app@example.com', ['ann@example.net'], withId);
  assert.equal(emailIdOf(again), first);
  assert.equal(await emailCount(alpha.projectId), before);
  // Concurrent repeats over separate connections: one email.
  const others = await Promise.all([session(), session(), session()]);
  const raced = await Promise.all(others.map((o) => o.send('app@example.com', ['ann@example.net'], msg({ 'Message-ID': '<race@app.example.com>' }))));
  assert.equal(new Set(raced.map(emailIdOf)).size, 1, raced.join('\n'));
  assert.equal(await emailCount(alpha.projectId), before + 1);
  // Another project's same Message-ID is its own.
  const beta = await ctx.tenant('beta');
  const b = await session(beta.key);
  assert.notEqual(emailIdOf(await b.send('app@example.com', ['ann@example.net'], withId)), first);
  // Past the window, the Message-ID starts a new email.
  await ctx.sql`update submitted_message_ids set created_at = now() - interval '25 hours' where email_id = ${first}`;
  const later = emailIdOf(await s.send('app@example.com', ['ann@example.net'], withId))!;
  assert.notEqual(later, first);
  for (const x of [s, b, ...others]) x.close();
});

test('From missing or invalid answers 550 5.6.0 saying so; nothing stored', async () => {
  const s = await session();
  const before = await emailCount(alpha.projectId);
  const missing = await s.send('app@example.com', ['ann@example.net'], message({ To: 'ann@example.net', Subject: 'x' }));
  assert.match(missing, /^550 5\.6\.0 .*no From header/);
  const invalid = await s.send('app@example.com', ['ann@example.net'], msg({ From: 'not an address' }));
  assert.match(invalid, /^550 5\.6\.0 Invalid From header: Not a valid email address/);
  const two = await s.send('app@example.com', ['ann@example.net'], msg({ From: 'a@example.com, b@example.com' }));
  assert.match(two, /^550 5\.6\.0 Invalid From header/);
  assert.equal(await emailCount(alpha.projectId), before);
  s.close();
});

test('X-Mailroom-Tags sets the tags; an invalid one answers 550 5.6.0 naming it', async () => {
  const s = await session();
  const ok = await s.send('app@example.com', ['ann@example.net'], msg({ 'X-Mailroom-Tags': 'category=reset, tenant=t_42' }));
  const [row] = await ctx.sql`select tags from emails where id = ${emailIdOf(ok)!}`;
  assert.deepEqual(row!.tags, [{ name: 'category', value: 'reset' }, { name: 'tenant', value: 't_42' }]);
  for (const bad of ['category=re set', 'novalue', 'a=b, a=c', Array.from({ length: 11 }, (_, i) => `t${i}=v`).join(',')]) {
    assert.match(await s.send('app@example.com', ['ann@example.net'], msg({ 'X-Mailroom-Tags': bad })), /^550 5\.6\.0 Invalid X-Mailroom-Tags header/, bad);
  }
  s.close();
});

test('over the project\'s rate limit a message answers 451 4.7.1 with the seconds to wait', async () => {
  const gamma = await ctx.tenant('gamma');
  const s = await session(gamma.key);
  for (let i = 0; i < ctx.config.apiRateLimitPerMinute; i++) await limiter.hit(`project:${gamma.projectId}`, ctx.config.apiRateLimitPerMinute);
  assert.match(await s.send('app@example.com', ['ann@example.net'], msg()), /^451 4\.7\.1 Rate limit exceeded .*try again in \d+ seconds$/);
  assert.equal(await emailCount(gamma.projectId), 0);
  s.close();
});

test('failed AUTH shares the API\'s per-address limit: past it, 421 4.7.0 and the connection closes', async () => {
  // The API on a real socket, so both see the client as 127.0.0.1.
  const server = await new Promise<Server>((resolve) => {
    const s = serve({ fetch: ctx.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // One relay failure was charged above; the API's failures take the address to the limit.
  for (let i = 0; i < 59; i++) {
    const res = await fetch(`${url}/v1/emails`, { headers: { authorization: `Bearer sk_${'B'.repeat(43)}` } });
    assert.equal(res.status, 401);
  }
  server.close();
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(`sk_${'C'.repeat(43)}`), /^421 4\.7\.0 Too many failed authentications/);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(s.closed, true);
});

test('a pipelining client\'s next MAIL, RCPT and DATA behind a message\'s content are answered with its 250, in one write', async () => {
  // Every write of the relay's sockets (the TLS one after STARTTLS).
  const { writes, restore } = recordSocketWrites(ctx.port);
  const envelope = 'MAIL FROM:<app@example.com>\r\nRCPT TO:<ann@example.net>\r\nDATA\r\n';
  const codes = (replies: string[]) => replies.map((r) => r.slice(0, 3));
  try {
    const s = await session();
    const before = await emailCount(alpha.projectId);
    writes.length = 0;
    const first = [await s.command(Buffer.from(envelope)), await s.reply(), await s.reply()];
    assert.deepEqual(codes(first), ['250', '250', '354']);
    assert.deepEqual(writes.map(codes), [['250', '250', '354']]);

    writes.length = 0;
    const second = [await s.command(Buffer.from(`${msg({ 'Message-ID': '<pipelined-1@example.com>' })}.\r\n${envelope}`)), await s.reply(), await s.reply(), await s.reply()];
    assert.match(second[0]!, /^250 2\.0\.0 OK queued as email_/);
    assert.deepEqual(codes(second), ['250', '250', '250', '354']);
    assert.deepEqual(writes.map(codes), [['250', '250', '250', '354']], 'the 250 for the message and the next three replies in one write');

    assert.match(await s.command(`${msg({ 'Message-ID': '<pipelined-2@example.com>' })}.`), /^250 2\.0\.0 OK queued as email_/);
    s.close();
    assert.equal(await emailCount(alpha.projectId), before + 2);
  } finally {
    restore();
  }
});
