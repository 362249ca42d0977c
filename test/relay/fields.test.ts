import { test } from 'node:test';
import assert from 'node:assert/strict';
import { simpleParser } from 'mailparser';
import { SmtpSession, emailIdOf, message, startTestRelay } from './setup.ts';

// §18.2: the relay accepts only what POST /v1/emails would. Each refusal stores nothing and
// leaves the connection usable for the next message.

const ctx = await startTestRelay({ env: { RELAY_ALLOW_PLAINTEXT_AUTH: 'yes' } });
const { key, projectId } = await ctx.tenant('fields');
const count = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`)[0].n;
const base = { From: 'app@example.com', To: 'ann@example.net' };

/**
 * A header value folded so no line is over RFC 5322's 998: at its spaces when it has them (then
 * unfolding gives the value back), else every 70 characters.
 */
const folded = (value: string) => (value.includes(' ') ? value.replace(/(.{60,}?) /g, '$1\r\n ') : value.match(/.{1,70}/g)!.join('\r\n '));
/** A subject of exactly `n` characters, with spaces to fold at. */
const subjectOf = (n: number) => 'sssssssss '.repeat(Math.ceil(n / 10) + 1).slice(0, n);

async function session() {
  const s = await SmtpSession.open(ctx.port);
  await s.command('EHLO client.test');
  assert.match(await s.auth(key), /^235/);
  return s;
}

/** Sends `bad`, expects `reply`, then a good message on the same connection is accepted. */
async function refused(s: SmtpSession, bad: string, reply: RegExp) {
  const before = await count();
  assert.match(await s.send('app@example.com', ['ann@example.net'], bad), reply);
  assert.equal(await count(), before, 'nothing stored');
  const after = await s.send('app@example.com', ['ann@example.net'], message({ ...base, Subject: 'after' }));
  assert.ok(emailIdOf(after), `the connection is still usable: ${after}`);
}

test('Subject over 998 characters unfolded answers 550 5.6.0 naming it; 998 is accepted', async () => {
  const s = await session();
  await refused(s, message({ ...base, Subject: folded(subjectOf(999)) }), /^550 5\.6\.0 Invalid Subject header/);
  assert.ok(emailIdOf(await s.send('app@example.com', ['ann@example.net'], message({ ...base, Subject: folded(subjectOf(998)) }))));
  s.close();
});

test('Reply-To: more than 50 mailboxes, or an invalid one, answers 550 5.6.0 naming it', async () => {
  const s = await session();
  const list = (n: number) => folded(Array.from({ length: n }, (_, i) => `r${i}@example.net`).join(', '));
  await refused(s, message({ ...base, Subject: 'r', 'Reply-To': list(51) }), /^550 5\.6\.0 Invalid Reply-To header: more than 50/);
  await refused(s, message({ ...base, Subject: 'r', 'Reply-To': 'not an address' }), /^550 5\.6\.0 Invalid Reply-To header/);
  const ok = emailIdOf(await s.send('app@example.com', ['ann@example.net'], message({ ...base, Subject: 'r', 'Reply-To': list(50) })));
  assert.ok(ok);
  const [row] = await ctx.sql<[{ n: number }]>`select cardinality(reply_to_addresses) as n from emails where id = ${ok!}`;
  assert.equal(row!.n, 50);
  s.close();
});

test('Message-ID over 998 bytes answers 550 5.6.0 naming it', async () => {
  const s = await session();
  await refused(s, message({ ...base, Subject: 'm', 'Message-ID': folded(`<${'x'.repeat(999)}@example.com>`) }), /^550 5\.6\.0 Invalid Message-ID header/);
  s.close();
});

test('a header section over 1,000 fields answers 550 5.6.0, over 256 KiB 552 5.3.4; at the bounds it is accepted and parses', async () => {
  const s = await session();
  const fields = (n: number) => Array.from({ length: n }, (_, i) => `X-F${i}: v`).join('\r\n');
  await refused(s, `${fields(1001 - 3)}\r\nFrom: app@example.com\r\nTo: ann@example.net\r\nSubject: f\r\n\r\nbody\r\n`, /^550 5\.6\.0 Header section refused: more than 1000 header fields/);
  const big = (bytes: number) => `X-Big: ${folded('b'.repeat(bytes))}`;
  await refused(s, message({ ...base, Subject: 'b', 'X-Big': folded('b'.repeat(260 * 1024)) }), /^552 5\.3\.4 Header section too large/);

  // At the bounds: 1,000 fields within 256 KiB. What is answered 250 also parses.
  const atBounds = `${fields(1000 - 4)}\r\n${big(200 * 1024)}\r\nFrom: app@example.com\r\nTo: ann@example.net\r\nSubject: f\r\n\r\nbody\r\n`;
  assert.ok(emailIdOf(await s.send('app@example.com', ['ann@example.net'], atBounds)));
  const parsed = await simpleParser(Buffer.from(atBounds));
  assert.equal(parsed.subject, 'f');
  s.close();
});

test('a MIME part whose header the worker could not parse (over 1 MiB) answers 550 5.6.0; nothing stored', async () => {
  const s = await session();
  const partHeader = 'X-F: v\r\n'.repeat(150_000); // 1.2 MB: mailparser refuses a part header past 1 MiB
  const bad = `From: app@example.com\r\nTo: ann@example.net\r\nSubject: p\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="b"\r\n\r\n`
    + `--b\r\nContent-Type: text/plain\r\n${partHeader}\r\nhello\r\n--b--\r\n`;
  await assert.rejects(simpleParser(Buffer.from(bad)), /Max header size/, 'the worker\'s parser would fail on it');
  await refused(s, bad, /^550 5\.6\.0 Malformed message: a MIME part's header is over 262144 bytes/);
  s.close();
});
