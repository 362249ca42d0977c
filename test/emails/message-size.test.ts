import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { composeMime, type ComposeInput } from '../../src/emails/compose.ts';
import { sizeUpperBound } from '../../src/emails/message-size.ts';

// Inputs chosen to push each encoding to its worst: characters quoted-printable must escape,
// multi-byte text, long unbroken lines, bare line breaks, binary data in text/* attachments.
const nasty = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 400 }),
  fc.tuple(fc.constantFrom('=', 'é', '€', '😀', '\n', '\r', '\r\n', ' ', '\t', 'a', '=\n', '\u0085'), fc.integer({ min: 1, max: 3000 }))
    .map(([s, n]) => s.repeat(n)),
);
const mailbox = fc.oneof(fc.emailAddress(), fc.tuple(nasty, fc.emailAddress()).map(([n, a]) => `"${n.replace(/["\\\r\n]/g, '')}" <${a}>`));
const input: fc.Arbitrary<ComposeInput> = fc.record({
  from: mailbox,
  to: fc.array(mailbox, { minLength: 1, maxLength: 5 }),
  cc: fc.array(mailbox, { maxLength: 3 }),
  bcc: fc.array(mailbox, { maxLength: 3 }),
  replyTo: fc.array(mailbox, { maxLength: 2 }),
  subject: nasty,
  html: fc.option(nasty, { nil: null }),
  text: fc.option(nasty, { nil: null }),
  headers: fc.dictionary(fc.stringMatching(/^X-[A-Za-z0-9-]{1,70}$/), nasty.map((v) => v.replace(/[\r\n]/g, '')), { maxKeys: 3 }),
  attachments: fc.array(fc.record({
    filename: nasty.map((s) => s.replace(/[\x00-\x1f\x7f]/g, '') || 'f'),
    contentType: fc.constantFrom('text/plain', 'text/html; charset=utf-8', 'application/octet-stream', 'message/rfc822', 'image/png'),
    content: fc.oneof(fc.uint8Array({ maxLength: 6000 }), fc.constantFrom(Buffer.alloc(4000, '='), Buffer.alloc(4000, '\n'), Buffer.alloc(4000, 0xff)))
      .map((b) => Buffer.from(b).toString('base64')),
  }), { maxLength: 3 }),
  messageId: fc.constant('<email_01TEST@acme.test>'),
  listUnsubscribeUrl: fc.option(fc.constant('https://mail.example.test/unsubscribe/eyJwIjoicHJval8wMSIsImUiOiJlbWFpbF8wMSJ9.abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'), { nil: undefined }),
});

test('the upper bound is never below the assembled size', async () => {
  await fc.assert(
    fc.asyncProperty(input, async (msg) => {
      const size = (await composeMime(msg)).length;
      assert.ok(size <= sizeUpperBound(msg), `composed ${size} > bound ${sizeUpperBound(msg)}`);
    }),
    { numRuns: 200 },
  );
});

test('the bound stays close enough to skip composing ordinary mail', () => {
  const small: ComposeInput = {
    from: 'Acme <billing@acme.test>', to: ['alice@example.test'], cc: [], bcc: [], replyTo: [],
    subject: 'Your receipt', html: '<p>Thanks</p>', text: 'Thanks', headers: {}, attachments: [],
  };
  assert.ok(sizeUpperBound(small) < 16 * 1024);
  const oneMiB = Buffer.alloc(1024 * 1024, 7).toString('base64');
  assert.ok(sizeUpperBound({ ...small, attachments: [{ filename: 'a.bin', contentType: 'application/pdf', content: oneMiB }] }) < 5 * 1024 * 1024);
});
