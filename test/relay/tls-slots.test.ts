import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { connect as netConnect, createServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestRelay } from './setup.ts';
import { ClientSlots, clientOf } from '../../src/relay/client-slots.ts';

// §22.6: on the implicit-TLS port a connection counts toward RELAY_MAX_CONNECTIONS_PER_CLIENT and
// RELAY_MAX_CONNECTIONS from accept, before its handshake; one client holding its slots with
// handshakes it never makes does not keep another client from a session. 127.0.0.1 and
// 127.0.0.2 are two clients (both loopback).

const PER_CLIENT = 5;
const IDLE_S = 3;
const ctx = await startTestRelay({
  smtps: true,
  env: { RELAY_ALLOW_PLAINTEXT_AUTH: 'yes', RELAY_MAX_CONNECTIONS_PER_CLIENT: String(PER_CLIENT), RELAY_MAX_CONNECTIONS: '8', RELAY_IDLE_TIMEOUT_SECONDS: String(IDLE_S) },
});
const smtpsPort = ctx.smtpsPort!;

type Raw = { socket: Socket; closedAt: number };
/** A TCP connection from `localAddress` that never says anything: no TLS ClientHello, ever. */
async function silent(port: number, localAddress = '127.0.0.1', host = '127.0.0.1'): Promise<Raw> {
  const raw: Raw = { socket: netConnect({ port, host, localAddress }), closedAt: 0 };
  raw.socket.on('error', () => {});
  raw.socket.on('close', () => { raw.closedAt = Date.now(); });
  await new Promise<void>((resolve) => raw.socket.once('connect', resolve).once('close', resolve));
  return raw;
}

/** A TLS session from `localAddress`: its greeting and its EHLO reply, or how it failed. */
async function session(localAddress: string, port = smtpsPort, host = '127.0.0.1'): Promise<string> {
  const socket = tlsConnect({ socket: netConnect({ port, host, localAddress }), rejectUnauthorized: false, servername: 'localhost' });
  let read = '';
  socket.on('data', (d: Buffer) => { read += d.toString('latin1'); });
  try {
    await new Promise<void>((resolve, reject) => {
      socket.once('secureConnect', resolve).once('error', reject).once('close', () => reject(new Error('closed before TLS')));
    });
    for (let i = 0; i < 100 && !/^220 /m.test(read); i++) await sleep(50);
    socket.write('EHLO client.test\r\n');
    for (let i = 0; i < 100 && !/^250 /m.test(read); i++) await sleep(50);
    return read;
  } catch (err) {
    return `failed: ${(err as Error).message}`;
  } finally {
    socket.destroy();
  }
}

/** A plain session's greeting on the STARTTLS port, from `localAddress`. */
async function plainGreeting(localAddress: string): Promise<string> {
  const socket = netConnect({ port: ctx.port, host: '127.0.0.1', localAddress });
  socket.on('error', () => {});
  let read = '';
  socket.on('data', (d: Buffer) => { read += d.toString('latin1'); });
  for (let i = 0; i < 100 && !/\r\n/.test(read); i++) await sleep(50);
  socket.destroy();
  return read.trim();
}

test('silent connections to the implicit-TLS port count per client from accept: the extra ones are closed, and another client still gets a session', { timeout: 60_000 }, async () => {
  // RELAY_MAX_CONNECTIONS is 8: the first client holding eight would once have filled the relay.
  const held = [];
  for (let i = 0; i < 8; i++) held.push(await silent(smtpsPort));
  await sleep(500);
  const closed = held.filter((r) => r.closedAt);
  assert.equal(closed.length, 8 - PER_CLIENT, `${closed.length} of the 3 extra connections were closed`);
  assert.deepEqual(held.slice(0, PER_CLIENT).map((r) => r.closedAt), Array(PER_CLIENT).fill(0), 'the first five stay open');

  const other = await session('127.0.0.2');
  assert.match(other, /^220 /m, other);
  assert.match(other, /^250[ -]/m, other);
  // The same client gets no sixth, on either port: the count spans both listeners.
  assert.match(await session('127.0.0.1'), /^failed/);
  assert.match(await plainGreeting('127.0.0.1'), /^421 4\.7\.0 .*Too many connections from your address/);
  assert.match(await plainGreeting('127.0.0.2'), /^220 /);

  // A handshake not finished within the idle timeout closes, and its slot is free again.
  const deadline = Date.now() + (IDLE_S + 3) * 1000;
  while (Date.now() < deadline && held.some((r) => !r.closedAt)) await sleep(100);
  assert.ok(held.every((r) => r.closedAt), 'every silent connection is closed after the idle timeout');
  const again = await session('127.0.0.1');
  assert.match(again, /^220 /m, again);
});

test('RELAY_MAX_CONNECTIONS counts handshakes too: past it the next connection is closed before TLS', { timeout: 60_000 }, async () => {
  // Five from one client and three from another fill the eight; a third client's is closed.
  const held = [];
  for (let i = 0; i < PER_CLIENT; i++) held.push(await silent(smtpsPort, '127.0.0.1'));
  for (let i = 0; i < 3; i++) held.push(await silent(smtpsPort, '127.0.0.2'));
  await sleep(300);
  assert.ok(held.every((r) => !r.closedAt));
  const third = await silent(smtpsPort, '127.0.0.3');
  await sleep(300);
  assert.ok(third.closedAt, 'the ninth connection is closed');
  assert.match(await plainGreeting('127.0.0.3'), /^421 4\.7\.0 /);
  for (const r of held) r.socket.destroy();
  await sleep(300);
  assert.match(await session('127.0.0.3'), /^220 /m);
});

test('IPv6 clients count per /64', () => {
  assert.equal(clientOf('2001:db8:1:2::1'), clientOf('2001:db8:1:2:ffff::9'));
  assert.notEqual(clientOf('2001:db8:1:2::1'), clientOf('2001:db8:1:3::1'));
  assert.equal(clientOf('::ffff:192.0.2.1'), '192.0.2.1');
  const slots = new ClientSlots(100, 2);
  const socket = (remoteAddress: string) => Object.assign(new EventEmitter(), { remoteAddress }) as unknown as Socket;
  const a = socket('2001:db8:1:2::1');
  slots.hold(a);
  slots.hold(socket('2001:db8:1:2::2'));
  assert.equal(slots.fits('2001:db8:1:2::3'), false, 'a third address of the same /64 does not fit');
  assert.equal(slots.fits('2001:db8:1:3::1'), true);
  a.emit('close');
  assert.equal(slots.fits('2001:db8:1:2::3'), true, 'a closed connection frees its slot');
  assert.equal(slots.total, 1);
});

const ipv6 = await new Promise<boolean>((resolve) => {
  const probe = createServer().once('error', () => resolve(false)).listen(0, '::1', () => probe.close(() => resolve(true)));
});

test('over IPv6 (::1) the implicit-TLS port counts silent connections per client too', { skip: !ipv6 && 'no ::1 here', timeout: 60_000 }, async () => {
  const v6 = await startTestRelay({ smtps: true, env: { RELAY_SMTP_HOST: '::1', RELAY_MAX_CONNECTIONS_PER_CLIENT: '2', RELAY_IDLE_TIMEOUT_SECONDS: String(IDLE_S) } });
  const held = [];
  for (let i = 0; i < 3; i++) held.push(await silent(v6.smtpsPort!, '::1', '::1'));
  await sleep(500);
  assert.deepEqual(held.map((r) => Boolean(r.closedAt)), [false, false, true]);
  for (const r of held) r.socket.destroy();
});

test('finished sessions free their slots, over implicit TLS and after STARTTLS', { timeout: 60_000 }, async () => {
  const { SmtpSession } = await import('./setup.ts');
  for (let i = 0; i < 2 * PER_CLIENT; i++) {
    assert.match(await session('127.0.0.4'), /^250[ -]/m, `implicit TLS session ${i + 1}`);
    const s = await SmtpSession.open(ctx.port);
    assert.match(s.greeting, /^220 /, `STARTTLS session ${i + 1}`);
    await s.startTls();
    s.close();
    await sleep(50);
  }
});
