import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createTestContext } from '../helpers/app.ts';

// A small limit so message_too_large is cheap to reach.
const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: '4096' } });
const { key } = await ctx.tenant();

const valid = { from: 'Acme <billing@acme.test>', to: 'alice@example.test', subject: 'Hi', text: 'Hello' };
type Detail = { loc: (string | number)[]; msg: string; type: string; ctx?: Record<string, unknown> };

async function refused(body: unknown, headers: Record<string, string> = {}): Promise<Detail[]> {
  const res = await ctx.call(key, '/v1/emails', { method: 'POST', body, headers });
  const json = (await res.json()) as { detail: Detail[] };
  assert.equal(res.status, 422, JSON.stringify(json));
  assert.ok(Array.isArray(json.detail) && json.detail.length > 0);
  for (const d of json.detail) {
    assert.ok(Array.isArray(d.loc) && typeof d.msg === 'string' && typeof d.type === 'string', JSON.stringify(d));
  }
  return json.detail;
}

async function expectIssue(body: unknown, loc: (string | number)[], type?: string) {
  const detail = await refused(body);
  const hit = detail.find((d) => JSON.stringify(d.loc) === JSON.stringify(loc));
  assert.ok(hit, `expected an issue at ${JSON.stringify(loc)}, got ${JSON.stringify(detail)}`);
  if (type) assert.equal(hit.type, type, JSON.stringify(hit));
  return hit;
}

test('required fields', async () => {
  await expectIssue({ to: 'a@example.test', subject: 's', text: 't' }, ['body', 'from'], 'missing');
  await expectIssue({ from: 'a@acme.test', subject: 's', text: 't' }, ['body', 'to'], 'missing');
  await expectIssue({ from: 'a@acme.test', to: 'a@example.test', text: 't' }, ['body', 'subject'], 'missing');
  await expectIssue({ ...valid, to: [] }, ['body', 'to'], 'too_short');
});

test('wrong types', async () => {
  await expectIssue({ ...valid, from: 42 }, ['body', 'from'], 'string_type');
  await expectIssue({ ...valid, subject: ['x'] }, ['body', 'subject'], 'string_type');
  await expectIssue({ ...valid, to: 7 }, ['body', 'to']);
  await expectIssue({ ...valid, cc: { a: 1 } }, ['body', 'cc']);
  await expectIssue({ ...valid, html: 5 }, ['body', 'html'], 'string_type');
  await expectIssue({ ...valid, headers: ['X-A'] }, ['body', 'headers']);
  await expectIssue({ ...valid, headers: { 'X-A': 1 } }, ['body', 'headers', 'X-A'], 'string_type');
  await expectIssue({ ...valid, attachments: {} }, ['body', 'attachments'], 'array_type');
});

test('non-object and malformed JSON bodies', async () => {
  for (const body of ['[]', '"text"', '42', 'null', 'true']) {
    const [d] = await refused(body);
    assert.deepEqual([d!.loc, d!.type], [['body'], 'object_type']);
  }
  for (const body of ['{', '{"from": }', '', 'nope', '{"a":1}}']) {
    const detail = await refused(body);
    assert.deepEqual(detail.map((d) => [d.loc, d.type]), [[['body'], 'json_invalid']]);
  }
  // Bytes that are not UTF-8 at all.
  const res = await ctx.app.request('/v1/emails', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]) });
  assert.equal(res.status, 422);
  assert.equal(((await res.json()) as { detail: Detail[] }).detail[0]!.type, 'json_invalid');
});

test('over-long fields', async () => {
  const long = (n: number) => `${'a'.repeat(n - '@acme.test'.length)}@acme.test`;
  await expectIssue({ ...valid, from: `${'N'.repeat(310)} <b@acme.test>` }, ['body', 'from'], 'string_too_long');
  assert.equal((await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, from: `${'N'.repeat(300)} <b@acme.test>` } })).status, 201);
  await expectIssue({ ...valid, subject: 's'.repeat(999) }, ['body', 'subject'], 'string_too_long');
  assert.equal((await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, subject: 's'.repeat(998) } })).status, 201);
  await expectIssue({ ...valid, attachments: [{ filename: 'f'.repeat(256), content: '' }] }, ['body', 'attachments', 0, 'filename'], 'string_too_long');
  await expectIssue({ ...valid, headers: { [`X-${'h'.repeat(75)}`]: 'v' } }, ['body', 'headers', `X-${'h'.repeat(75)}`], 'header_name_too_long');
  assert.equal((await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, headers: { [`X-${'h'.repeat(74)}`]: 'v' } } })).status, 201);
  await expectIssue({ ...valid, to: long(300) }, ['body', 'to']);
});

test('addresses must be exactly one RFC 5322 mailbox', async () => {
  for (const bad of ['not-an-address', 'a@b', 'a@example.test, b@example.test', 'Alice alice@example.test', 'a@example.test (x)', '<a@example.test', 'Eve <e@example.test>\r\nBcc: x@example.test', 'Group: a@example.test;', '']) {
    await expectIssue({ ...valid, from: bad }, ['body', 'from'], 'value_error');
    await expectIssue({ ...valid, to: ['ok@example.test', bad] }, ['body', 'to', 1], 'value_error');
  }
  await expectIssue({ ...valid, cc: 'nope' }, ['body', 'cc'], 'value_error');
  await expectIssue({ ...valid, bcc: ['nope'] }, ['body', 'bcc', 0], 'value_error');
  await expectIssue({ ...valid, reply_to: 'nope' }, ['body', 'reply_to'], 'value_error');
  for (const good of ['"Doe, Jane" <jane@example.test>', 'Jöhn <j@exämple.test>', '<a+tag@sub.example.test>']) {
    assert.equal((await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, from: good, to: good } })).status, 201, good);
  }
});

test('at most 50 recipients across to, cc and bcc', async () => {
  const addrs = (n: number, p: string) => Array.from({ length: n }, (_, i) => `${p}${i}@example.test`);
  await expectIssue({ ...valid, to: addrs(51, 't') }, ['body', 'to'], 'too_long');
  const hit = await expectIssue({ ...valid, to: addrs(20, 't'), cc: addrs(20, 'c'), bcc: addrs(11, 'b') }, ['body'], 'too_many_recipients');
  assert.deepEqual(hit.ctx, { max_recipients: 50, count: 51 });
  const ok = await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, to: addrs(20, 't'), cc: addrs(20, 'c'), bcc: addrs(10, 'b'), reply_to: addrs(5, 'r') } });
  assert.equal(ok.status, 201);
});

test('custom headers: name pattern, CR/LF values, reserved names', async () => {
  for (const name of ['Bad Name', 'X:Colon', 'X-Ünï', '']) {
    await expectIssue({ ...valid, headers: { [name]: 'v' } }, ['body', 'headers', name], 'header_name_invalid');
  }
  for (const value of ['a\r\nBcc: x@example.test', 'a\nb', 'a\rb']) {
    await expectIssue({ ...valid, headers: { 'X-Inject': value } }, ['body', 'headers', 'X-Inject'], 'header_value_invalid');
  }
  for (const name of ['From', 'to', 'CC', 'Bcc', 'subject', 'DATE', 'Message-ID', 'mime-version', 'Content-Type', 'content-transfer-encoding']) {
    await expectIssue({ ...valid, headers: { [name]: 'x' } }, ['body', 'headers', name], 'header_reserved');
  }
  assert.equal((await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, headers: { 'Reply-To': 'x@example.test', 'X-Ok': 'ünïcode is fine' } } })).status, 201);
});

test('attachments: base64 content, content type', async () => {
  for (const content of ['not base64!', 'aGVsbG8', 'aGVs=bG8=', '====', 'a']) {
    await expectIssue({ ...valid, attachments: [{ filename: 'ok.txt', content: 'aGk=' }, { filename: 'a.bin', content }] }, ['body', 'attachments', 1, 'content'], 'base64_invalid');
  }
  await expectIssue({ ...valid, attachments: [{ filename: 'a.bin' }] }, ['body', 'attachments', 0, 'content'], 'missing');
  await expectIssue({ ...valid, attachments: [{ content: 'aGk=' }] }, ['body', 'attachments', 0, 'filename'], 'missing');
  await expectIssue({ ...valid, attachments: [{ filename: 'a\r\nb', content: 'aGk=' }] }, ['body', 'attachments', 0, 'filename']);
  await expectIssue({ ...valid, attachments: [{ filename: 'a', content: 'aGk=', content_type: 'text/plain\r\nX-Evil: 1' }] }, ['body', 'attachments', 0, 'content_type']);
  await expectIssue({ ...valid, attachments: [{ filename: 'a', content: 'aGk=', content_type: 'nonsense' }] }, ['body', 'attachments', 0, 'content_type'], 'string_pattern_mismatch');
  await expectIssue({ ...valid, attachments: [{ filename: 'a', content: 'aGk=', content_type: 'Multipart/Mixed' }] }, ['body', 'attachments', 0, 'content_type'], 'value_error');
  const ok = await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, attachments: [{ filename: 'a.csv', content: 'aGk=', content_type: 'text/csv; charset=utf-8' }, { filename: 'fwd.eml', content: 'aGk=', content_type: 'message/rfc822' }] } });
  assert.equal(ok.status, 201);
});

test('strings PostgreSQL cannot store are refused, not a 500', async () => {
  await expectIssue({ ...valid, subject: 'a\u0000b' }, ['body', 'subject'], 'string_invalid');
  await expectIssue({ ...valid, headers: { 'X-A': '\ud800' } }, ['body', 'headers', 'X-A'], 'string_invalid');
  await expectIssue({ ...valid, text: 'x\udc00' }, ['body', 'text'], 'string_invalid');
});

test('neither html nor text: missing_content', async () => {
  for (const body of [{ ...valid, text: undefined }, { ...valid, text: null, html: null }, { ...valid, text: '', html: '' }]) {
    const detail = await refused(body);
    assert.deepEqual(detail.map((d) => [d.loc, d.type]), [[['body'], 'missing_content']]);
  }
});

test('the assembled message over EMAIL_MAX_MESSAGE_BYTES: message_too_large', async () => {
  // 3000 raw bytes become ~4 KB of base64 plus MIME headers: over 4096 although the JSON field is not.
  const attachments = [{ filename: 'big.bin', content: randomBytes(3000).toString('base64') }];
  const detail = await refused({ ...valid, attachments });
  assert.equal(detail.length, 1);
  assert.deepEqual(detail[0]!.loc, ['body']);
  assert.equal(detail[0]!.type, 'message_too_large');
  assert.equal(detail[0]!.ctx!.limit_bytes, 4096);
  assert.ok((detail[0]!.ctx!.size_bytes as number) > 4096);
  // A small attachment under the limit is accepted.
  const ok = await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid, attachments: [{ filename: 's.bin', content: randomBytes(600).toString('base64') }] } });
  assert.equal(ok.status, 201);
});

test('Idempotency-Key longer than 256 characters', async () => {
  const detail = await refused(valid, { 'idempotency-key': 'k'.repeat(257) });
  assert.deepEqual(detail.map((d) => [d.loc, d.type]), [[['header', 'idempotency-key'], 'string_too_long']]);
  const empty = await refused(valid, { 'idempotency-key': '' });
  assert.deepEqual(empty.map((d) => [d.loc, d.type]), [[['header', 'idempotency-key'], 'string_too_short']]);
  const ok = await ctx.call(key, '/v1/emails', { method: 'POST', body: valid, headers: { 'idempotency-key': 'k'.repeat(256) } });
  assert.equal(ok.status, 201);
});

test('every problem is reported at once', async () => {
  const detail = await refused({ from: 'bad', to: 'also bad', subject: 1, headers: { Subject: 'x' } });
  const locs = detail.map((d) => d.loc.join('.'));
  for (const loc of ['body.from', 'body.to', 'body.subject', 'body.headers.Subject']) assert.ok(locs.includes(loc), loc);
});
