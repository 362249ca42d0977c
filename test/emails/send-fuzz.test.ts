import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTestContext } from '../helpers/app.ts';

// A small message limit so the fuzz also reaches message_too_large.
const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: '8192' } });
const { key } = await ctx.tenant();

let run = 0;

/** Strings PostgreSQL can hold: no NUL, no unpaired surrogates. */
const storable = (v: string) => !v.includes('\u0000') && !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(v);

/** Every answer is a 201 SendEmailResponse or a 422 HTTPValidationError; never anything else. */
async function checkAnswer(body: string, idempotencyKey?: string) {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  const res = await ctx.app.request('/v1/emails', { method: 'POST', headers, body });
  const text = await res.text();
  const json = JSON.parse(text) as Record<string, unknown>;
  if (res.status === 201) {
    assert.match(String(json.id), /^email_[0-9A-Z]{26}$/, text);
    assert.equal(json.status, 'queued');
    assert.deepEqual(Object.keys(json).sort(), ['id', 'status']);
    return 201;
  }
  assert.equal(res.status, 422, `status ${res.status}: ${text} for ${body.slice(0, 500)}`);
  const detail = json.detail as { loc: unknown[]; msg: unknown; type: unknown }[];
  assert.ok(Array.isArray(detail) && detail.length > 0, text);
  for (const d of detail) {
    assert.ok(Array.isArray(d.loc) && d.loc.length > 0 && (d.loc[0] === 'body' || d.loc[0] === 'header'), text);
    assert.ok(d.loc.every((p) => typeof p === 'string' || Number.isInteger(p)), text);
    assert.equal(typeof d.msg, 'string', text);
    assert.equal(typeof d.type, 'string', text);
  }
  return 422;
}

// Each field is usually valid and sometimes not, so runs mix acceptances (which compose the
// message and write the row) with refusals of every kind.
const junk = fc.oneof(fc.jsonValue({ maxDepth: 2 }), fc.string({ maxLength: 40 }), fc.constant(undefined));
const mostly = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>) =>
  fc.oneof({ arbitrary: good, weight: 12 }, { arbitrary: bad, weight: 1 });
const goodMailbox = fc.oneof(
  fc.constantFrom('alice@example.test', 'Ann Lee <ann@example.test>', '"Doe, Jane" <jane@example.test>', 'Jö <j@exämple.test>'),
  fc.emailAddress(),
  fc.tuple(fc.stringMatching(/^[A-Za-z .'-]{1,20}$/), fc.emailAddress()).map(([name, addr]) => `${name} <${addr}>`),
);
const mailbox = mostly(goodMailbox, fc.oneof(fc.string({ maxLength: 30 }), fc.constantFrom('a@b', 'x <y@z.test> w', 'a@x.test, b@x.test')));
const recipients = mostly(fc.oneof(mailbox, fc.array(mailbox, { maxLength: 12 })), fc.oneof(fc.array(mailbox, { minLength: 51, maxLength: 55 }), junk));
const optionalRecipients = fc.oneof(recipients, fc.constant(null), fc.constant(undefined));
const headerName = mostly(
  fc.oneof(fc.constantFrom('X-Tag', 'List-Unsubscribe', 'Reply-To', 'X-Entity-Ref-ID'), fc.stringMatching(/^[!-9;-~]{1,76}$/)),
  fc.oneof(fc.constantFrom('Subject', 'bcc', 'Content-Type', 'Bad Name', 'x'.repeat(77)), fc.string({ maxLength: 80 })),
);
const headerValue = mostly(fc.string({ maxLength: 40 }).filter((v) => !/[\r\n]/.test(v) && storable(v)), fc.oneof(fc.constantFrom('a\r\nb', 'x\ny', '\u0000', '\ud800'), junk));
const base64 = fc.uint8Array({ maxLength: 6000 }).map((b) => Buffer.from(b).toString('base64'));
const attachment = fc.record({
  filename: mostly(fc.stringMatching(/^[\w .-]{1,40}$/), fc.oneof(fc.constantFrom('x'.repeat(256), 'a\r\nb', ''), junk)),
  content: mostly(base64, fc.oneof(fc.constantFrom('aGVsbG8', 'not base64!'), junk)),
  content_type: mostly(fc.constantFrom('application/pdf', 'text/plain; charset=utf-8', 'image/png', 'message/rfc822', 'multipart/mixed', undefined), fc.oneof(fc.string({ maxLength: 30 }), junk)),
}, { requiredKeys: ['filename', 'content'] });
const content = fc.oneof(
  { arbitrary: fc.oneof(fc.string({ minLength: 1, maxLength: 200 }), fc.constantFrom('<p>hi</p>', 'ünïcode ✓ \r\n lines')), weight: 6 },
  { arbitrary: fc.constantFrom('', null, undefined), weight: 2 },
  { arbitrary: junk, weight: 1 },
);

const nearValid = fc.record({
  from: mailbox,
  to: recipients,
  cc: optionalRecipients,
  bcc: optionalRecipients,
  reply_to: optionalRecipients,
  subject: mostly(fc.string({ maxLength: 60 }), fc.oneof(fc.constant('s'.repeat(999)), junk)),
  html: content,
  text: content,
  headers: mostly(fc.dictionary(headerName, headerValue, { maxKeys: 4 }), junk),
  attachments: mostly(fc.array(attachment, { maxLength: 3 }), junk),
}, { requiredKeys: ['from', 'to', 'subject'] });

test('arbitrary JSON and non-JSON bodies answer 201 or 422, never a 5xx', async () => {
  await fc.assert(
    fc.asyncProperty(fc.oneof(fc.json({ maxDepth: 3 }), fc.string({ maxLength: 80 }), fc.anything({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? 'undefined')), async (body) => {
      await checkAnswer(body);
    }),
    { numRuns: 120 },
  );
});

test('near-valid requests answer 201 or 422 in the right shape, never a 5xx', async () => {
  const seen = new Map<number, number>();
  await fc.assert(
    fc.asyncProperty(nearValid, fc.option(fc.stringMatching(/^[!-~]{0,300}$/), { nil: undefined }), async (body, idem) => {
      run++;
      // A unique prefix keeps keys from colliding across runs (a collision would rightly be a 409).
      const status = await checkAnswer(JSON.stringify(body), idem === undefined ? undefined : `${run}-${idem}`);
      seen.set(status, (seen.get(status) ?? 0) + 1);
    }),
    { numRuns: 180 },
  );
  // Both outcomes occur in quantity, so acceptances (compose + insert) are fuzzed too.
  assert.ok((seen.get(201) ?? 0) >= 20 && (seen.get(422) ?? 0) >= 20, JSON.stringify([...seen]));
});

test('fully valid random requests are accepted', async () => {
  const valid = fc.record({
    from: fc.emailAddress(),
    to: fc.array(fc.emailAddress(), { minLength: 1, maxLength: 5 }),
    subject: fc.string({ maxLength: 100 }).filter(storable),
    text: fc.string({ minLength: 1, maxLength: 300 }).filter(storable),
  });
  let accepted = 0;
  await fc.assert(
    fc.asyncProperty(valid, async (body) => {
      const status = await checkAnswer(JSON.stringify(body));
      if (status === 201) accepted++;
    }),
    { numRuns: 40 },
  );
  // fc.emailAddress() also produces exotic but valid forms the service deliberately narrows;
  // the common ones must pass.
  assert.ok(accepted >= 20, `only ${accepted} of 40 valid requests accepted`);
});
