import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { testConfig } from '../helpers/app.ts';
import { closeSinkTransports, sendToSink } from '../../src/providers/sink-transport.ts';
import { classifySendError } from '../../src/providers/errors.ts';

/**
 * The worker's connections to the sink, against a bare SMTP server that counts connections and
 * logins and can refuse a recipient or end every session: the pool's own behaviour, apart from
 * what the sink does with a message.
 */
const sockets = new Set<Socket>();
const seen = { connections: 0, logins: 0, messages: 0, inFlight: 0, peakInFlight: 0 };
const server = new SMTPServer({
  authMethods: ['PLAIN', 'LOGIN'],
  allowInsecureAuth: true,
  disabledCommands: ['STARTTLS'],
  hideDSN: false,
  disableReverseLookup: true,
  closeTimeout: 200,
  logger: false,
  onConnect(session, callback) {
    seen.connections++;
    callback();
  },
  onAuth(auth, _session, callback) {
    seen.logins++;
    callback(null, { user: auth.username });
  },
  onRcptTo(address, _session, callback) {
    if (address.address.startsWith('refused@')) return callback(Object.assign(new Error('No such mailbox'), { responseCode: 550 }));
    callback();
  },
  onData(stream, _session, callback) {
    seen.inFlight++;
    seen.peakInFlight = Math.max(seen.peakInFlight, seen.inFlight);
    stream.resume();
    stream.on('end', () => setTimeout(() => {
      seen.inFlight--;
      seen.messages++;
      callback(null, `OK: queued as msg_${String(seen.messages).padStart(26, '0')}`);
    }, 5));
  },
});
server.server.on('connection', (socket: Socket) => {
  sockets.add(socket);
  socket.on('close', () => sockets.delete(socket));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const port = (server.server.address() as AddressInfo).port;
after(() => {
  closeSinkTransports();
  return new Promise<void>((resolve) => server.close(() => resolve()));
});

const CONCURRENCY = 3;
const config = testConfig('postgres://unused', { SINK_SMTP_HOST: '127.0.0.1', SINK_SMTP_PORT: String(port), WORKER_CONCURRENCY: String(CONCURRENCY) });
const raw = Buffer.from('From: a@example.com\r\nTo: b@example.net\r\nSubject: pooled\r\n\r\nbody\r\n');
const send = (to = 'b@example.net') =>
  sendToSink(config, { projectId: 'proj_x', emailId: 'email_y', from: 'a@example.com', recipients: [to], raw });

test('sends share at most WORKER_CONCURRENCY connections, each logged in once, and reuse them', async () => {
  const before = { ...seen };
  const ids = await Promise.all(Array.from({ length: 30 }, () => send()));
  assert.equal(new Set(ids.map((r) => r.messageId)).size, 30);
  assert.ok(seen.connections - before.connections <= CONCURRENCY, `${seen.connections - before.connections} connections`);
  assert.ok(seen.peakInFlight <= CONCURRENCY);
  assert.equal(seen.logins - before.logins, seen.connections - before.connections);
  const opened = seen.connections;
  for (let i = 0; i < 5; i++) await send();
  assert.equal(seen.connections, opened, 'sends one after another reuse an idle connection');
});

test('a refused recipient fails that send alone; the connection stays in use', async () => {
  await Promise.all(Array.from({ length: CONCURRENCY }, () => send()));
  const opened = seen.connections;
  const err = await send('refused@example.net').then(() => undefined, (e: { code?: string; responseCode?: number }) => e);
  assert.equal(err?.code, 'EENVELOPE');
  assert.equal(err?.responseCode, 550);
  assert.equal(classifySendError(err).retry, false);
  // The reset runs after the refusal is answered; then every connection, that one too, carries a send at once.
  await new Promise((resolve) => setTimeout(resolve, 100));
  await Promise.all(Array.from({ length: CONCURRENCY }, () => send()));
  assert.equal(seen.connections, opened, 'the session was reset, not replaced');
});

test('connections the server ended while idle are replaced without failing a send', async () => {
  await Promise.all(Array.from({ length: CONCURRENCY }, () => send()));
  const opened = seen.connections;
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => setTimeout(resolve, 100));
  const results = await Promise.all(Array.from({ length: CONCURRENCY }, () => send()));
  assert.equal(results.length, CONCURRENCY);
  assert.ok(seen.connections > opened, 'new connections were opened');
});

test('a refused login fails the send with EAUTH and is not kept: the next send logs in anew', async () => {
  let attempts = 0;
  const refusing = new SMTPServer({
    authMethods: ['PLAIN', 'LOGIN'], allowInsecureAuth: true, disabledCommands: ['STARTTLS'], disableReverseLookup: true, logger: false,
    onAuth(_auth, _session, callback) {
      attempts++;
      callback(new Error('Invalid login'));
    },
  });
  await new Promise<void>((resolve) => refusing.listen(0, '127.0.0.1', resolve));
  const target = testConfig('postgres://unused', { SINK_SMTP_HOST: '127.0.0.1', SINK_SMTP_PORT: String((refusing.server.address() as AddressInfo).port) });
  const attempt = () => sendToSink(target, { projectId: 'proj_x', emailId: 'email_y', from: 'a@example.com', recipients: ['b@example.net'], raw })
    .then(() => undefined, (e: { code?: string }) => e);
  try {
    assert.equal((await attempt())?.code, 'EAUTH');
    assert.equal((await attempt())?.code, 'EAUTH');
    assert.equal(attempts, 2);
  } finally {
    closeSinkTransports();
    await new Promise<void>((resolve) => refusing.close(() => resolve()));
  }
});
