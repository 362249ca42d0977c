import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { SmtpSession, emailIdOf, message, startTestRelay } from './setup.ts';

// Bad messages over a raw socket: each a clear SMTP refusal, nothing stored, and the same
// connection goes on to send a good message.
const ctx = await startTestRelay({ env: { API_RATE_LIMIT_PER_MINUTE: '100000' } });
const alpha = await ctx.tenant('alpha');
const good = message({ From: 'app@example.com', To: 'ann@example.net', Subject: 'ok' });
const emailCount = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${alpha.projectId}`)[0].n;

const s = await SmtpSession.open(ctx.port);
await s.startTls();
assert.match(await s.auth(alpha.key), /^235 /);

async function refused(raw: Buffer | string, pattern: RegExp, mailArgs = '') {
  const before = await emailCount();
  const reply = await s.send('app@example.com', ['ann@example.net'], raw, mailArgs);
  assert.match(reply, pattern);
  assert.equal(await emailCount(), before, 'nothing stored');
  assert.match(await s.send('app@example.com', ['ann@example.net'], good), /^250 2\.0\.0 OK queued as /, 'the connection is still usable');
}

test('a bare LF or bare CR answers 550 5.6.0', async () => {
  await refused('From: app@example.com\r\nTo: ann@example.net\r\nSubject: x\r\n\r\nline one\nline two\r\n', /^550 5\.6\.0 .*bare CR or LF/);
  await refused('From: app@example.com\r\nTo: ann@example.net\rBcc: x@example.net\r\n\r\nbody\r\n', /^550 5\.6\.0 .*bare CR or LF/);
});

test('a NUL byte answers 550 5.6.0', async () => {
  await refused('From: app@example.com\r\nTo: ann@example.net\r\nSubject: x\r\n\r\nnul \0 here\r\n', /^550 5\.6\.0 .*NUL/);
});

test('8-bit data without BODY=8BITMIME answers 550 5.6.3; with it, it is accepted', async () => {
  const eightBit = Buffer.from('From: app@example.com\r\nTo: ann@example.net\r\nSubject: x\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGrüße\r\n');
  await refused(eightBit, /^550 5\.6\.3 .*8BITMIME/);
  const ok = await s.send('app@example.com', ['ann@example.net'], eightBit, ' BODY=8BITMIME');
  const [row] = await ctx.sql<[{ raw: Buffer }]>`select raw_message as raw from emails where id = ${emailIdOf(ok)!} and project_id = ${alpha.projectId}`;
  assert.ok(row.raw.includes(Buffer.from('\r\n\r\nGrüße\r\n')), 'kept as submitted, 8-bit bytes and all');
});

test('a 2 MB header line answers 550 5.6.0; a malformed header section too', async () => {
  await refused(`From: app@example.com\r\nTo: ann@example.net\r\nX-Long: ${'a'.repeat(2 * 1024 * 1024)}\r\n\r\nbody\r\n`, /^550 5\.6\.0 Malformed message: header line 3 is longer than 998/);
  await refused('this is not a header\r\nFrom: app@example.com\r\n\r\nbody\r\n', /^550 5\.6\.0 Malformed message: header line 1 /);
  await refused(' folded first\r\nFrom: app@example.com\r\n\r\nbody\r\n', /^550 5\.6\.0 Malformed message: header line 1 /);
  await refused('\r\njust a body\r\n', /^550 5\.6\.0 Malformed message: it has no header fields/);
  // Folded, each line short, but too long a Message-ID to key the retry dedupe.
  await refused(`From: app@example.com\r\nMessage-ID: <${'a'.repeat(900)}\r\n ${'b'.repeat(900)}@x>\r\n\r\nbody\r\n`, /^550 5\.6\.0 Invalid Message-ID header: longer than 998/);
});

test('a header injection through X-Mailroom-Tags answers 550 5.6.0 naming it', async () => {
  // Folded onto a second line, or smuggled in an encoded word: neither becomes a header or a tag.
  await refused(message({ From: 'app@example.com', To: 'ann@example.net', 'X-Mailroom-Tags': 'a=b\r\n Bcc: evil@example.org' }), /^550 5\.6\.0 Invalid X-Mailroom-Tags header/);
  await refused(message({ From: 'app@example.com', To: 'ann@example.net', 'X-Mailroom-Tags': '=?utf-8?Q?a=3Db=0D=0ABcc:_evil@example.org?=' }), /^550 5\.6\.0 Invalid X-Mailroom-Tags header/);
});

test('fuzzed DATA never crashes the relay, never stores half a message, and every reply is a full SMTP reply', async () => {
  const header = fc.constantFrom('From: app@example.com', 'To: ann@example.net', 'Subject: fuzz', 'X-Mailroom-Tags: a=b', 'Message-ID: <m@x>',
    'Content-Type: multipart/mixed; boundary=b', 'Content-Transfer-Encoding: base64', 'MIME-Version: 1.0', 'Bcc: h@example.net');
  const junk = fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a).toString('latin1'));
  const data = fc.tuple(fc.array(fc.oneof(header, junk), { maxLength: 8 }), fc.oneof(junk, fc.constant('--b\r\nContent-Type: text/html\r\n\r\n<p>x</p>\r\n--b--')))
    .map(([lines, body]) => Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}\r\n`, 'latin1'));
  await fc.assert(fc.asyncProperty(data, async (raw) => {
    const before = await emailCount();
    const reply = await s.send('app@example.com', ['ann@example.net'], raw, ' BODY=8BITMIME');
    assert.match(reply, /^(250 2\.0\.0 OK queued as email_|5\d\d 5\.\d\.\d+ )/, reply);
    const after = await emailCount();
    if (reply.startsWith('250')) {
      const [row] = await ctx.sql`select raw_message, source from emails where id = ${emailIdOf(reply)!}`;
      // A new email holds exactly the bytes submitted; a repeated Message-ID adds none.
      assert.ok(after === before + 1 ? Buffer.compare(row!.rawMessage, raw) === 0 : after === before);
      // What the parse stored reads back through the API, never as a 5xx.
      assert.equal((await ctx.call(alpha.key, `/v1/emails/${emailIdOf(reply)!}`)).status, 200);
    } else {
      assert.equal(after, before);
    }
  }), { numRuns: 60, seed: 30 });
  assert.equal((await ctx.call(alpha.key, '/v1/emails?limit=100')).status, 200);
  assert.match(await s.send('app@example.com', ['ann@example.net'], good), /^250 /);
});
