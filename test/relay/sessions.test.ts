import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { SmtpSession, emailIdOf, message, startTestRelay } from './setup.ts';
import { revokeApiKey } from '../../src/keys/service.ts';

// §18.3 (revocation reaches open SMTP sessions) and §18.4 (one client cannot hold the relay).

const ctx = await startTestRelay({ env: { RELAY_ALLOW_PLAINTEXT_AUTH: 'yes', RELAY_MAX_CONNECTIONS_PER_CLIENT: '3', RELAY_IDLE_TIMEOUT_SECONDS: '2' } });
const good = message({ From: 'app@example.com', To: 'ann@example.net', Subject: 'ok' });

/** Runs a Python script with the relay's port as argv[1]; answers its stdout lines. */
function python(script: string, args: string[]): { lines: () => string[]; input: (line: string) => void; done: Promise<number | null> } {
  const child = spawn('python3', ['-u', '-c', script, String(ctx.port), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  // A failed assertion must not leave the client waiting on its stdin, holding a relay slot and the file open.
  after(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  return {
    // Whole lines only: a chunk may end mid-line.
    lines: () => out.split('\n').slice(0, -1).filter(Boolean),
    input: (line) => child.stdin.write(`${line}\n`),
    done: new Promise((resolve) => child.on('exit', resolve)),
  };
}

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

test('a key revoked while its smtplib session is open gets 535 5.7.8 at the next MAIL FROM; nothing more is accepted', async () => {
  const { projectId } = await ctx.tenant('revoked');
  const { createApiKey } = await import('../../src/keys/service.ts');
  const key = await createApiKey(ctx.sql, projectId, 'relay', 'sending');
  // One session: a message, then (after the revoke) another, then a plain MAIL FROM.
  const script = `
import smtplib, sys
s = smtplib.SMTP('127.0.0.1', int(sys.argv[1]), timeout=10)
s.login('mailroom', sys.argv[2])
msg = sys.argv[3].encode()
print('first', s.sendmail('app@example.com', ['ann@example.net'], msg) == {})
sys.stdin.readline()
try:
    s.sendmail('app@example.com', ['ann@example.net'], msg)
    print('second accepted')
except smtplib.SMTPSenderRefused as e:
    print('second', e.smtp_code, e.smtp_error.decode())
print('mail', *s.mail('app@example.com'))
print('noop', s.noop()[0])
s.quit()
`;
  const py = python(script, [key.key, good]);
  await until('the first message', () => py.lines().find((l) => l.startsWith('first')));
  assert.equal(py.lines()[0], 'first True');
  const [{ n: before }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`;
  assert.equal(before, 1);

  await revokeApiKey(ctx.sql, projectId, key.id);
  py.input('go');
  assert.equal(await py.done, 0);
  const [second, mail, noop] = py.lines().slice(1);
  assert.match(second!, /^second 535 5\.7\.8 /);
  assert.match(mail!, /^mail 53\d /, 'the session is no longer authenticated');
  assert.equal(noop, 'noop 250', 'the connection is still usable');
  const [{ n: after }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`;
  assert.equal(after, 1, 'nothing stored after the revoke');
});

test('RELAY_MAX_CONNECTIONS_PER_CLIENT: one address holds at most that many; the next gets 421 4.7.0 and is closed', async () => {
  const held = await Promise.all([0, 1, 2].map(() => SmtpSession.open(ctx.port)));
  for (const s of held) assert.match(s.greeting, /^220 /);
  const extra = await SmtpSession.open(ctx.port);
  assert.match(extra.greeting, /^421 4\.7\.0 /);
  await sleep(100);
  assert.equal(extra.closed, true);
  held[0]!.close();
  await sleep(200);
  const again = await SmtpSession.open(ctx.port);
  assert.match(again.greeting, /^220 /, 'a slot freed is usable again');
  again.close();
  for (const s of held.slice(1)) s.close();
  await sleep(100);
});

/** A raw socket that writes `text` one byte every `everyMs`; answers everything it read and when it closed. */
async function trickle(text: string, everyMs: number, maxMs: number) {
  const socket = connect({ port: ctx.port, host: '127.0.0.1' });
  let read = '';
  let closedAt = 0;
  socket.on('data', (d) => { read += d.toString('latin1'); });
  const closed = new Promise<void>((resolve) => socket.on('close', () => { closedAt = Date.now(); resolve(); }));
  socket.on('error', () => {});
  await until('the greeting', () => (read.includes('220 ') ? true : undefined));
  const started = Date.now();
  for (const ch of text) {
    if (closedAt || Date.now() - started > maxMs) break;
    socket.write(ch);
    await sleep(everyMs);
  }
  await Promise.race([closed, sleep(maxMs)]);
  socket.destroy();
  return { read, lasted: (closedAt || Date.now()) - started, closed: closedAt > 0 };
}

test('a command line trickled one byte at a time is closed RELAY_IDLE_TIMEOUT_SECONDS after its first byte', async () => {
  // 200 ms a byte keeps smtp-server's own idle timer (2 s) from ever firing.
  const t = await trickle(`EHLO ${'x'.repeat(200)}\r\n`, 200, 8000);
  assert.equal(t.closed, true, 'the connection was closed');
  assert.ok(t.lasted < 4000, `closed after ${t.lasted} ms`);
  assert.match(t.read, /421 4\.4\.2 /);
});

test('a DATA section trickled one byte at a time is closed RELAY_IDLE_TIMEOUT_SECONDS after its first byte; nothing stored', async () => {
  const { key, projectId } = await ctx.tenant('trickle');
  const session = await SmtpSession.open(ctx.port);
  assert.match(await session.command('EHLO client.test'), /^250/);
  assert.match(await session.auth(key), /^235/);
  assert.match(await session.command('MAIL FROM:<app@example.com>'), /^250/);
  assert.match(await session.command('RCPT TO:<ann@example.net>'), /^250/);
  assert.match(await session.command('DATA'), /^354/);
  const started = Date.now();
  const body = good.repeat(20);
  const writer = (async () => {
    for (const ch of body) {
      if (session.closed || Date.now() - started > 8000) break;
      (session as unknown as { socket: { write(s: string): void } }).socket.write(ch);
      await sleep(200);
    }
  })();
  const reply = await session.reply(10_000);
  await writer;
  assert.match(reply, /^421 4\.4\.2 /);
  assert.ok(Date.now() - started < 4000, `closed after ${Date.now() - started} ms`);
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId}`;
  assert.equal(n, 0);
  session.close();
});

test('a message sent at a normal pace still goes through, over several commands', async () => {
  const { key } = await ctx.tenant('steady');
  const session = await SmtpSession.open(ctx.port);
  await session.command('EHLO client.test');
  await session.auth(key);
  for (let i = 0; i < 2; i++) {
    assert.ok(emailIdOf(await session.send('app@example.com', ['ann@example.net'], good)));
    await sleep(1200); // idle between messages is smtp-server's own timeout, not the per-line one
  }
  session.close();
});
