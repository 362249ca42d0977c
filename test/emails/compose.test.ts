import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { simpleParser, type AddressObject } from 'mailparser';
import { composeMime, type ComposeInput } from '../../src/emails/compose.ts';

const base: ComposeInput = {
  from: 'Acme Billing <billing@acme.test>',
  to: ['alice@example.test'],
  cc: [],
  bcc: [],
  replyTo: [],
  subject: 'Your invoice',
  html: null,
  text: 'Hello',
  headers: {},
  attachments: [],
};

const addresses = (v: AddressObject | AddressObject[] | undefined) =>
  (Array.isArray(v) ? v : v ? [v] : []).flatMap((a) => a.value.map((m) => m.address));

test('headers: From with display name, To, Cc, Reply-To, Subject, Message-ID, custom headers', async () => {
  const raw = await composeMime({
    ...base,
    from: 'Ácme Café <billing@acme.test>',
    to: ['alice@example.test', 'Bob <bob@example.test>'],
    cc: ['Carol <carol@example.test>'],
    replyTo: ['support@acme.test'],
    subject: 'Héllo — invoice #42',
    headers: { 'X-Campaign': 'spring', 'X-Entity-Ref-ID': 'abc-123' },
    messageId: '<email_01TEST@mailroom>',
  });
  const mail = await simpleParser(raw);
  assert.deepEqual(mail.from?.value, [{ address: 'billing@acme.test', name: 'Ácme Café' }]);
  assert.deepEqual(addresses(mail.to), ['alice@example.test', 'bob@example.test']);
  assert.deepEqual(addresses(mail.cc), ['carol@example.test']);
  assert.deepEqual(addresses(mail.replyTo), ['support@acme.test']);
  assert.equal(mail.subject, 'Héllo — invoice #42');
  assert.equal(mail.messageId, '<email_01TEST@mailroom>');
  assert.equal(mail.headers.get('x-campaign'), 'spring');
  assert.equal(mail.headers.get('x-entity-ref-id'), 'abc-123');
  assert.ok(mail.date instanceof Date);
  assert.equal(mail.text?.trim(), 'Hello');
  assert.equal(mail.html, false);
  // Lines end in CRLF as SMTP requires.
  assert.ok(raw.toString().includes('\r\nSubject: '));
  assert.ok(!/[^\r]\n/.test(raw.toString()));
});

test('Bcc recipients never appear in the message bytes', async () => {
  const raw = await composeMime({ ...base, bcc: ['hidden@example.test', 'Secret <secret@example.test>'] });
  const text = raw.toString();
  assert.ok(!/^bcc:/im.test(text));
  assert.ok(!text.includes('hidden@example.test'));
  assert.ok(!text.includes('secret@example.test'));
  assert.equal((await simpleParser(raw)).bcc, undefined);
});

test('a Message-ID is generated on the sender domain when none is given', async () => {
  const mail = await simpleParser(await composeMime(base));
  assert.match(mail.messageId ?? '', /^<[0-9a-f-]{36}@acme\.test>$/);
});

test('text only, html only, and both (multipart/alternative)', async () => {
  const textOnly = await composeMime({ ...base, text: 'plain body', html: null });
  assert.match(textOnly.toString(), /^Content-Type: text\/plain/m);
  assert.doesNotMatch(textOnly.toString(), /multipart/);

  const htmlOnlyRaw = await composeMime({ ...base, text: null, html: '<p>only html</p>' });
  assert.match(htmlOnlyRaw.toString(), /^Content-Type: text\/html/m);
  assert.doesNotMatch(htmlOnlyRaw.toString(), /multipart|text\/plain/);
  assert.equal((await simpleParser(htmlOnlyRaw)).html, '<p>only html</p>\n');

  const bothRaw = await composeMime({ ...base, text: 'plain ünïcode', html: '<b>rich</b>' });
  assert.match(bothRaw.toString(), /^Content-Type: multipart\/alternative/m);
  const both = await simpleParser(bothRaw);
  assert.equal(both.text?.trim(), 'plain ünïcode');
  assert.equal(both.html, '<b>rich</b>');
});

test('attachments keep their bytes, filename and content type', async () => {
  const bytes = randomBytes(3000);
  const raw = await composeMime({
    ...base,
    html: '<p>see attached</p>',
    attachments: [
      { filename: 'report.pdf', contentType: 'application/pdf', content: bytes.toString('base64') },
      { filename: 'notes.txt', contentType: 'text/plain', content: Buffer.from('ünïcode notes').toString('base64') },
    ],
  });
  assert.match(raw.toString(), /^Content-Type: multipart\/mixed/m);
  const mail = await simpleParser(raw);
  assert.equal(mail.attachments.length, 2);
  const [pdf, notes] = mail.attachments;
  assert.equal(pdf!.filename, 'report.pdf');
  assert.equal(pdf!.contentType, 'application/pdf');
  assert.ok(pdf!.content.equals(bytes));
  assert.equal(notes!.filename, 'notes.txt');
  assert.equal(notes!.content.toString('utf8'), 'ünïcode notes');
  assert.equal(mail.text?.trim(), 'Hello');
});

test('List-Unsubscribe and List-Unsubscribe-Post (RFC 8058) are added when a URL is given', async () => {
  const mail = await simpleParser(await composeMime({ ...base, listUnsubscribeUrl: 'https://mail.acme.test/unsubscribe/tok123' }));
  assert.equal(mail.headerLines.find((h) => h.key === 'list-unsubscribe')?.line, 'List-Unsubscribe: <https://mail.acme.test/unsubscribe/tok123>');
  assert.equal(mail.headerLines.find((h) => h.key === 'list-unsubscribe-post')?.line, 'List-Unsubscribe-Post: List-Unsubscribe=One-Click');
});

test('no List-Unsubscribe without a URL', async () => {
  const raw = (await composeMime(base)).toString();
  assert.doesNotMatch(raw, /^List-Unsubscribe/im);
});

test("the caller's own List-Unsubscribe (any case) is kept and none is added", async () => {
  const raw = await composeMime({
    ...base,
    headers: { 'list-unsubscribe': '<mailto:unsub@acme.test>' },
    listUnsubscribeUrl: 'https://mail.acme.test/unsubscribe/tok123',
  });
  const mail = await simpleParser(raw);
  const lines = mail.headerLines.filter((h) => h.key === 'list-unsubscribe');
  assert.equal(lines.length, 1);
  assert.match(lines[0]!.line, /<mailto:unsub@acme\.test>$/);
  assert.ok(!raw.toString().includes('tok123'));
  assert.equal(mail.headerLines.filter((h) => h.key === 'list-unsubscribe-post').length, 0);
});

test('values that look like paths or URLs are content, never read from disk or the network', async () => {
  const mail = await simpleParser(await composeMime({ ...base, text: '/etc/passwd', html: 'https://example.test/' }));
  assert.equal(mail.text?.trim(), '/etc/passwd');
  assert.equal(mail.html, 'https://example.test/');
});
