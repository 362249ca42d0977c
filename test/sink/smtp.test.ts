import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createTestContext } from '../helpers/app.ts';
import { revokeApiKey } from '../../src/keys/service.ts';
import { caughtId, smtpClient, smtpDialog, startSink } from './helpers.ts';
import { recordSocketWrites } from '../helpers/socket-writes.ts';

const LIMIT = 65536;
const ctx = await createTestContext({ env: { SINK_SMTP_PORT: '0', EMAIL_MAX_MESSAGE_BYTES: String(LIMIT) } });
const sink = await startSink(ctx);

const count = async (projectId: string) =>
  Number((await ctx.sql`select count(*)::int as n from sink_messages where project_id = ${projectId}`)[0]!.n);

test('listens on the ephemeral port it was given', () => {
  assert.equal(sink.host, '127.0.0.1');
  assert.ok(sink.port > 0 && sink.port !== 1025);
});

test('AUTH PLAIN with an API key: the message, its parts and raw source come back through the API', async () => {
  const { key, projectId } = await ctx.tenant();
  const pdf = Buffer.from('%PDF-1.4 fake pdf bytes');
  const info = await smtpClient(sink.port, { user: 'anything', pass: key }, 'PLAIN').sendMail({
    from: '"Ann Sender" <ann@example.com>',
    to: ['bob@example.net', 'Carol <carol@example.org>'],
    cc: 'dan@example.com',
    bcc: 'hidden@example.com',
    subject: 'Hello from the sink ✓',
    text: 'plain body',
    html: '<p>html <b>body</b></p>',
    headers: { 'X-Campaign': 'spring' },
    attachments: [
      { filename: 'invoice.pdf', content: pdf, contentType: 'application/pdf' },
      { filename: 'notes.txt', content: 'note', contentType: 'application/octet-stream' },
    ],
  });
  assert.match(info.response, /^250 /);
  const id = caughtId(info.response);
  assert.deepEqual(info.accepted, ['bob@example.net', 'carol@example.org', 'dan@example.com', 'hidden@example.com']);

  const list = await (await ctx.call(key, '/v1/sink/messages')).json();
  assert.equal(list.has_more, false);
  assert.equal(list.data.length, 1);
  const item = list.data[0];
  assert.equal(item.id, id);
  assert.equal(item.email_id, null);
  assert.equal(item.from, 'Ann Sender <ann@example.com>');
  assert.deepEqual(item.to, ['bob@example.net', 'Carol <carol@example.org>']);
  assert.deepEqual(item.cc, ['dan@example.com']);
  assert.equal(item.subject, 'Hello from the sink ✓');
  assert.ok(!Number.isNaN(Date.parse(item.received_at)));
  assert.equal(Object.hasOwn(item, 'raw'), false);

  const res = await ctx.call(key, `/v1/sink/messages/${id}`);
  assert.equal(res.status, 200);
  const msg = await res.json();
  assert.equal(msg.text, 'plain body');
  assert.equal(msg.html, '<p>html <b>body</b></p>');
  assert.equal(msg.headers['X-Campaign'], 'spring');
  assert.equal(msg.headers['Message-ID'], info.messageId);
  assert.match(msg.headers['Content-Type'], /^multipart\/mixed/);
  assert.deepEqual(msg.attachments, [
    { filename: 'invoice.pdf', content_type: 'application/pdf', size_bytes: pdf.length },
    // The declared type, not one guessed from the file name.
    { filename: 'notes.txt', content_type: 'application/octet-stream', size_bytes: 4 },
  ]);
  assert.match(msg.raw, /^X-Campaign: spring\r$/m);
  assert.match(msg.raw, new RegExp(pdf.toString('base64')));
  assert.doesNotMatch(msg.raw, /hidden@example\.com/, 'nodemailer leaves Bcc out of the message');
  assert.equal(msg.size_bytes, Buffer.byteLength(msg.raw));
  assert.equal(await count(projectId), 1);
});

test('AUTH LOGIN works too; an HTML-only message has text null', async () => {
  const { key } = await ctx.tenant();
  const info = await smtpClient(sink.port, { user: 'me', pass: key }, 'LOGIN').sendMail({
    from: 'a@example.com', to: 'b@example.com', subject: 'login', html: '<h1>Hi</h1>',
  });
  const msg = await (await ctx.call(key, `/v1/sink/messages/${caughtId(info.response)}`)).json();
  // A single-part body keeps the line break that ends it on the wire.
  assert.equal(msg.html.trimEnd(), '<h1>Hi</h1>');
  assert.equal(msg.text, null);
  assert.deepEqual(msg.attachments, []);
});

test('EHLO advertises AUTH PLAIN LOGIN and SIZE, and no STARTTLS', async () => {
  const s = await smtpDialog(sink.port);
  const ehlo = await s.send('EHLO client.test');
  s.close();
  assert.equal(ehlo.code, 250);
  assert.match(ehlo.text, /AUTH PLAIN LOGIN/);
  assert.match(ehlo.text, new RegExp(`SIZE ${LIMIT}`));
  assert.doesNotMatch(ehlo.text, /STARTTLS/);
});

test('mail without AUTH is refused with 530', async () => {
  const { projectId } = await ctx.tenant();
  await assert.rejects(
    smtpClient(sink.port).sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 'x', text: 'x' }),
    (err: { responseCode?: number }) => err.responseCode === 530,
  );
  const s = await smtpDialog(sink.port);
  await s.send('EHLO client.test');
  const mail = await s.send('MAIL FROM:<a@example.com>');
  s.close();
  assert.equal(mail.code, 530);
  assert.equal(await count(projectId), 0);
});

test('a wrong, malformed or revoked key is refused with 535', async () => {
  const { key, keyId, projectId } = await ctx.tenant();
  const send = (pass: string, method: 'PLAIN' | 'LOGIN') =>
    smtpClient(sink.port, { user: 'u', pass }, method).sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 'x', text: 'x' });
  const is535 = (err: { responseCode?: number }) => err.responseCode === 535;
  const wrong = `sk_${'A'.repeat(43)}`;
  await assert.rejects(send(wrong, 'PLAIN'), is535);
  await assert.rejects(send(wrong, 'LOGIN'), is535);
  await assert.rejects(send('not-a-key', 'PLAIN'), is535);
  const s = await smtpDialog(sink.port);
  await s.send('EHLO client.test');
  assert.equal((await s.send(`AUTH PLAIN ${Buffer.from('\0u\0').toString('base64')}`)).code, 535);
  s.close();
  await send(key, 'PLAIN');
  await revokeApiKey(ctx.sql, projectId, keyId);
  await assert.rejects(send(key, 'PLAIN'), is535);
  await assert.rejects(send(key, 'LOGIN'), is535);
  assert.equal(await count(projectId), 1);
});

test('messages over EMAIL_MAX_MESSAGE_BYTES are refused with 552, declared or not', async () => {
  const { key, projectId } = await ctx.tenant();
  const big = 'x'.repeat(LIMIT + 100);
  await assert.rejects(
    smtpClient(sink.port, { user: 'u', pass: key }).sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 'big', text: big }),
    (err: { responseCode?: number }) => err.responseCode === 552,
  );

  const s = await smtpDialog(sink.port);
  await s.send('EHLO client.test');
  assert.equal((await s.send(`AUTH PLAIN ${Buffer.from(`\0u\0${key}`).toString('base64')}`)).code, 235);
  assert.equal((await s.send(`MAIL FROM:<a@example.com> SIZE=${LIMIT + 1}`)).code, 552);
  assert.equal((await s.send('MAIL FROM:<a@example.com>')).code, 250);
  assert.equal((await s.send('RCPT TO:<b@example.com>')).code, 250);
  assert.equal((await s.send('DATA')).code, 354);
  const line = `${'y'.repeat(998)}\r\n`;
  s.write(`Subject: undeclared\r\n\r\n${line.repeat(Math.ceil(LIMIT / line.length) + 1)}.\r\n`);
  assert.equal((await s.reply()).code, 552);
  // The session stays usable: a small message afterwards is caught.
  assert.equal((await s.send('MAIL FROM:<a@example.com>')).code, 250);
  assert.equal((await s.send('RCPT TO:<b@example.com>')).code, 250);
  assert.equal((await s.send('DATA')).code, 354);
  const ok = await s.send('Subject: small\r\n\r\nfits\r\n.');
  s.close();
  assert.equal(ok.code, 250);
  const list = await (await ctx.call(key, '/v1/sink/messages')).json();
  assert.deepEqual(list.data.map((m: { subject: string }) => m.subject), ['small']);
  // Bare SMTP without To/Cc headers: the envelope recipients stand in.
  assert.deepEqual(list.data[0].to, ['b@example.com']);
  assert.equal(list.data[0].from, 'a@example.com');
  assert.equal(await count(projectId), 1);
});

test('swaks can deliver to the sink with AUTH', async (t) => {
  const exec = promisify(execFile);
  try {
    await exec('swaks', ['--version']);
  } catch {
    t.skip('swaks is not installed (apt-get install -y swaks)');
    return;
  }
  const { key } = await ctx.tenant();
  const { stdout } = await exec('swaks', [
    '--server', `127.0.0.1:${sink.port}`, '--auth', 'LOGIN', '--auth-user', 'swaks', '--auth-password', key,
    '--from', 'swaks@example.com', '--to', 'rcpt@example.com', '--header', 'Subject: via swaks', '--body', 'hello swaks',
  ]);
  const id = caughtId(stdout);
  const msg = await (await ctx.call(key, `/v1/sink/messages/${id}`)).json();
  assert.equal(msg.subject, 'via swaks');
  assert.equal(msg.text?.trim(), 'hello swaks');
  assert.deepEqual(msg.to, ['rcpt@example.com']);
});

test('the sink serves at most 100 connections at once; the next is turned away with 421', async () => {
  const { connect } = await import('node:net');
  const open: import('node:net').Socket[] = [];
  const greeting = (socket: import('node:net').Socket) =>
    new Promise<string>((resolve) => { let text = ''; socket.on('data', (d) => { text += d; if (text.includes('\r\n')) resolve(text); }); });
  try {
    const greetings = Array.from({ length: 100 }, () => {
      const socket = connect(sink.port, '127.0.0.1');
      open.push(socket);
      return greeting(socket);
    });
    for (const text of await Promise.all(greetings)) assert.match(text, /^220 /, 'each of the 100 is served');
    const extra = connect(sink.port, '127.0.0.1');
    open.push(extra);
    assert.match(await greeting(extra), /^421 /);
  } finally {
    for (const socket of open) socket.destroy();
  }
});

test('the replies to a pipelined MAIL, RCPT and DATA leave the sink in one write', async () => {
  const { key, projectId } = await ctx.tenant();
  // Every write of the sink's sockets.
  const { writes, restore } = recordSocketWrites(sink.port);
  try {
    const s = await smtpDialog(sink.port);
    await s.send('EHLO client.test');
    assert.equal((await s.send(`AUTH PLAIN ${Buffer.from(`\0u\0${key}`).toString('base64')}`)).code, 235);
    writes.length = 0;
    s.write('MAIL FROM:<ann@example.com>\r\nRCPT TO:<bob@example.net>\r\nDATA\r\n');
    assert.deepEqual([(await s.reply()).code, (await s.reply()).code, (await s.reply()).code], [250, 250, 354]);
    assert.deepEqual(writes.map((w) => w.map((reply) => reply.slice(0, 3))), [['250', '250', '354']]);
    s.write('Subject: pipelined\r\n\r\nbody\r\n.\r\n');
    assert.equal((await s.reply()).code, 250);
    assert.equal((await s.send('QUIT')).code, 221);
    s.close();
  } finally {
    restore();
  }
  assert.equal(await count(projectId), 1);
});
