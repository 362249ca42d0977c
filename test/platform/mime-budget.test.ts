import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { closeMimePool, mimePoolThreads, parseSinkMessage, readReceived, setMimeBudget, startMimePool } from '../../src/platform/mime-pool.ts';

// §22.1: a message's time budget counts from when its thread starts on it, as PostgreSQL's
// statement_timeout does, not from when it was handed to the pool: a message queued behind
// another is not refused for the other's time.
after(() => closeMimePool());

const message = Buffer.from('From: a@example.com\r\nTo: b@example.com\r\nSubject: queued\r\n\r\nHello.\r\n');
const envelope = { from: 'a@example.com', recipients: ['b@example.com'] };

test('a whole message queued behind a busy thread longer than its budget is still parsed', async () => {
  await setMimeBudget({ threads: 1, timeMs: 800 });
  // The only thread is held by a streamed message whose bytes are slow to come (that wait is not counted).
  const slow = new PassThrough();
  const holding = readReceived(slow);
  const queuedAt = performance.now();
  const queued = parseSinkMessage(message, envelope);
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  slow.end(message);
  const parsed = await queued;
  assert.ok(performance.now() - queuedAt >= 1_500, 'the message waited for the thread');
  assert.equal(parsed.subject, 'queued');
  assert.equal((await holding).reading.subject, 'queued');
});

test('a whole message over its budget once started is refused naming the budget', async () => {
  await setMimeBudget({ threads: 1, timeMs: 50 });
  // Quoted-printable lines of spaces are slow to decode: far more than 50 ms for a few MiB.
  const body = `${' '.repeat(74)}=\r\n`.repeat(60_000);
  const slowMessage = Buffer.from(`From: a@example.com\r\nSubject: slow\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n${body}x\r\n`);
  await assert.rejects(parseSinkMessage(slowMessage, envelope), { name: 'MimeBudgetExceeded', budget: 'time', limit: 50 });
  await setMimeBudget({});
  assert.equal((await parseSinkMessage(message, envelope)).subject, 'queued', 'the next message gets a new thread');
});

test('a worker\'s boot starts one thread, which loads the parsers before the first message comes', async () => {
  await closeMimePool();
  assert.equal(await mimePoolThreads(), 0);
  startMimePool();
  assert.equal(await mimePoolThreads(), 1);
  assert.equal((await parseSinkMessage(message, envelope)).subject, 'queued');
});
