import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import nodemailer from 'nodemailer';
import { emailIdOf, startTestRelay } from './setup.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { connectProvider } from '../../src/providers/connections.ts';

// Real SMTP clients through the relay, then the worker to the sink or to SES (the fake, which
// keeps the raw bytes): what goes out is the message as submitted, with only §13.2's edits.
const run = promisify(execFile);
const fake = await startFakeSes();
const ctx = await startTestRelay({
  smtps: true,
  env: { AWS_ENDPOINT_URL_SESV2: fake.url, SINK_SMTP_PORT: '0', PUBLIC_BASE_URL: 'https://mail.example.com', EMAIL_MAX_MESSAGE_BYTES: '1048576' },
});
const sink = await ctx.tenant('sink project');
const ses = await ctx.tenant('ses project');
await connectProvider(ctx.sql, ctx.config, {
  projectId: ses.projectId, region: 'eu-west-1', accessKeyId: 'AKIDFAKESES', secretAccessKey: 'fake-secret-access-key',
  sendQuota: { maxSendRate: 1000, max24HourSend: 1_000_000 },
});
await startTestWorker(ctx.config, ctx.sql);
const dir = await mkdtemp(path.join(tmpdir(), 'mailroom-relay-clients-'));

const submitted = (messageId?: string) => Buffer.from([
  'From: "Keycloak" <auth@example.com>',
  'To: Ann <ann@example.net>',
  'Cc: cc@example.net',
  'Bcc: hidden@example.net',
  'Subject: Reset your password',
  ...(messageId ? [`Message-ID: ${messageId}`] : []),
  'X-Mailroom-Tags: category=reset',
  'Date: Wed, 25 Nov 2026 12:00:00 +0000',
  'MIME-Version: 1.0',
  'Content-Type: multipart/alternative; boundary="b1"',
  'DKIM-Signature: v=1; a=rsa-sha256; d=example.com; s=s1; h=from:to:subject;',
  '\tbh=abc=; b=folded',
  '',
  '--b1',
  'Content-Type: text/plain; charset=us-ascii',
  '',
  'Click the link.',
  '.leading dot survives',
  '--b1',
  'Content-Type: text/html; charset=us-ascii',
  '',
  '<p>Click the <a href="https://example.com/r">link</a>.</p>',
  '--b1--',
  '',
].join('\r\n'));

/** The submitted bytes as they must leave: Bcc and X-Mailroom-Tags gone, nothing else touched. */
function expectedOut(raw: Buffer, added: string[]): string {
  const text = raw.toString('utf8').replace('Bcc: hidden@example.net\r\n', '').replace('X-Mailroom-Tags: category=reset\r\n', '');
  return added.map((h) => `${h}\r\n`).join('') + text;
}

const sinkRaw = (emailId: string) => waitFor(`the sink catches ${emailId}`, async () => {
  const [row] = await ctx.sql<[{ raw: Buffer }?]>`select raw from sink_messages where email_id = ${emailId}`;
  return row?.raw.toString('utf8');
});

/**
 * The headers the relay adds for unsubscribing: none here, since these messages go to three
 * recipients and List-Unsubscribe is only for an email to exactly one (one recipient's click
 * must never suppress another). The single-recipient rule is tested in test/sending/unsubscribe.test.ts.
 */
function unsubscribeHeaders(_projectId: string, _emailId: string, out: string): string[] {
  assert.doesNotMatch(out, /^List-Unsubscribe/im, 'no List-Unsubscribe on mail to several recipients');
  return [];
}

test('nodemailer over STARTTLS (port, STARTTLS, username mailroom, API key): the sink gets the bytes as submitted', async () => {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1', port: ctx.port, secure: false, requireTLS: true, tls: { ca: ctx.cert, servername: 'localhost' },
    auth: { user: 'mailroom', pass: sink.key },
  });
  const raw = submitted('<nm-starttls@example.com>');
  const info = await transport.sendMail({ envelope: { from: 'auth@example.com', to: ['ann@example.net', 'cc@example.net', 'hidden@example.net'] }, raw });
  transport.close();
  const id = emailIdOf(info.response);
  assert.ok(id, info.response);
  const out = await sinkRaw(id);
  assert.equal(out, expectedOut(raw, unsubscribeHeaders(sink.projectId, id, out)));
  const [row] = await ctx.sql`select to_addresses, cc_addresses, bcc_addresses, tags, subject from emails where id = ${id}`;
  assert.deepEqual(row!.toAddresses, ['ann@example.net']);
  assert.deepEqual(row!.ccAddresses, ['cc@example.net']);
  assert.deepEqual(row!.bccAddresses, ['hidden@example.net']);
  assert.deepEqual(row!.tags, [{ name: 'category', value: 'reset' }]);
  assert.equal(row!.subject, 'Reset your password');
  // Everything after acceptance is as for API mail: sent, delivered by the sink, with events.
  const state = await waitFor('sent', async () => (await ctx.sql`select status from emails where id = ${id} and status = 'sent'`)[0]);
  assert.ok(state);
  // The worker read the bodies as it sent it.
  const read = (await (await ctx.call(sink.key, `/v1/emails/${id}`)).json()) as { html: string; text: string };
  assert.match(read.html, /<a href="https:\/\/example.com\/r">link<\/a>/);
});

test('nodemailer over implicit TLS composing its own message: a Message-ID is kept, Bcc never leaves', async () => {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1', port: ctx.smtpsPort, secure: true, tls: { ca: ctx.cert, servername: 'localhost' },
    auth: { user: 'mailroom', pass: sink.key },
  });
  const info = await transport.sendMail({ from: 'App <app@example.com>', to: 'ann@example.net', bcc: 'secret@example.net', subject: 'Composed', text: 'Hi ✓', html: '<b>Hi ✓</b>' });
  transport.close();
  const id = emailIdOf(info.response)!;
  const out = await sinkRaw(id);
  assert.match(out, new RegExp(`^Message-ID: ${info.messageId.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\r$`, 'm'));
  assert.doesNotMatch(out, /secret@example\.net/);
  const [row] = await ctx.sql`select bcc_addresses from emails where id = ${id}`;
  // The sink has the message before the send is recorded with the bodies the worker read.
  await waitFor('sent', async () => (await ctx.sql`select status from emails where id = ${id} and status = 'sent'`)[0]);
  const read = (await (await ctx.call(sink.key, `/v1/emails/${id}`)).json()) as { html: string; text: string };
  assert.equal(read.text.trim(), 'Hi ✓');
  assert.equal(read.html, '<b>Hi ✓</b>');
  assert.deepEqual(row!.bccAddresses, ['secret@example.net']);
});

test('Python smtplib (starttls, login, sendmail) to SES: SendEmail Raw carries the bytes as submitted, Message-ID added', async () => {
  const raw = submitted();
  const file = path.join(dir, 'python.eml');
  await writeFile(file, raw);
  const script = `
import smtplib, ssl, sys
ctx = ssl.create_default_context(cadata=sys.argv[3])
ctx.check_hostname = False  # the test certificate names localhost; the chain is still verified
with smtplib.SMTP('127.0.0.1', int(sys.argv[1]), timeout=10) as s:
    s.starttls(context=ctx)
    s.login('mailroom', sys.argv[2])
    data = open(sys.argv[4], 'rb').read()
    s.mail('auth@example.com')
    for r in ['ann@example.net', 'cc@example.net', 'hidden@example.net']:
        s.rcpt(r)
    print(s.data(data)[1].decode())
`;
  const { stdout } = await run('python3', ['-c', script, String(ctx.port), ses.key, ctx.cert, file], { timeout: 20_000 });
  const id = emailIdOf(stdout.trim())!;
  assert.ok(id, stdout);
  const request = await waitFor('SES receives it', () => fake.requests.find((r) => r.raw.includes('Reset your password') && r.raw.includes(`<${id}@example.com>`)));
  assert.equal(request.raw, expectedOut(raw, [`Message-ID: <${id}@example.com>`, ...unsubscribeHeaders(ses.projectId, id, request.raw)]));
  assert.deepEqual(request.Destination, { ToAddresses: ['ann@example.net'], CcAddresses: ['cc@example.net'], BccAddresses: ['hidden@example.net'] });
});

test('swaks with STARTTLS and AUTH LOGIN: a duplicate Message-ID yields one email', async () => {
  const file = path.join(dir, 'swaks.eml');
  await writeFile(file, submitted('<swaks-1@example.com>'));
  const swaks = () => run('swaks', ['--server', `127.0.0.1:${ctx.port}`, '--tls', '--auth', 'LOGIN', '--auth-user', 'mailroom', '--auth-password', sink.key,
    '--from', 'auth@example.com', '--to', 'ann@example.net', '--data', file, '--timeout', '10'], { timeout: 20_000 });
  const queued = async () => {
    const { stdout } = await swaks();
    const reply = /<~ +(250 2\.0\.0 OK queued as \S+)/.exec(stdout)?.[1];
    assert.ok(reply, stdout);
    return emailIdOf(reply)!;
  };
  const first = await queued();
  const second = await queued();
  assert.equal(second, first);
  const rows = await ctx.sql`select id from emails where project_id = ${sink.projectId} and submitted_message_id = '<swaks-1@example.com>'`;
  assert.equal(rows.length, 1);
  await sinkRaw(first);
});

test('through SES too: 51 recipients get 452, an oversize message 552 with nothing stored', async () => {
  const transport = nodemailer.createTransport({
    host: '127.0.0.1', port: ctx.port, requireTLS: true, tls: { ca: ctx.cert, servername: 'localhost' }, auth: { user: 'mailroom', pass: ses.key },
  });
  const many = Array.from({ length: 51 }, (_, i) => `r${i}@example.net`);
  // nodemailer sends to the recipients taken and reports the one refused.
  const info = await transport.sendMail({ from: 'app@example.com', to: many, subject: 'x', text: 'y' }) as unknown as { rejected: string[]; rejectedErrors: { response: string }[]; response: string };
  assert.deepEqual(info.rejected, ['r50@example.net']);
  assert.match(info.rejectedErrors[0]!.response, /^452 4\.5\.3 /);
  const [row] = await ctx.sql`select cardinality(to_addresses) as n from emails where id = ${emailIdOf(info.response)!}`;
  assert.equal(row!.n, 50);
  const [{ n: before }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${ses.projectId}`;
  const big = 'x'.repeat(76) + '\r\n';
  await assert.rejects(transport.sendMail({ from: 'app@example.com', to: 'ann@example.net', subject: 'big', text: big.repeat(Math.ceil(ctx.config.emailMaxMessageBytes / big.length) + 10) }),
    (err: { response?: string }) => /^552 5\.3\.4/.test(err.response ?? ''));
  const [{ n: after }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${ses.projectId}`;
  assert.equal(after, before);
  transport.close();
});
