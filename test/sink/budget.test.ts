import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setMimeBudget } from '../../src/platform/mime-pool.ts';
import { createTestContext } from '../helpers/app.ts';
import { HEALTHZ_BOUND_MS, qpMessage, serveApp, warmMimePool, whileProbing } from '../helpers/hostile.ts';
import { caughtId, smtpDialog, startSink } from './helpers.ts';

// §22.1: the sink parses what it catches in the MIME pool. A message over the parse budget is
// refused for good with 554 5.6.0 naming the budget (not 451, which a client would retry), nothing
// is stored, and /healthz on the API beside it answers every probe within 250 ms.
const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: String(40 * 1024 * 1024) } });
const sink = await startSink(ctx);
await setMimeBudget({ timeMs: 3_000 });
await warmMimePool();
const url = await serveApp(ctx.app);
const { key, projectId } = await ctx.tenant();

async function deliver(raw: Buffer) {
  const s = await smtpDialog(sink.port);
  try {
    await s.send('EHLO client.test');
    assert.equal((await s.send(`AUTH PLAIN ${Buffer.from(`\0any\0${key}`).toString('base64')}`)).code, 235);
    assert.equal((await s.send('MAIL FROM:<app@example.com>')).code, 250);
    assert.equal((await s.send('RCPT TO:<ann@example.net>')).code, 250);
    assert.equal((await s.send('DATA')).code, 354);
    s.write(raw);
    return await s.send('\r\n.');
  } finally {
    s.close();
  }
}

const stored = async () => (await ctx.sql`select count(*)::int as n from sink_messages where project_id = ${projectId}`)[0]!.n as number;

test('a 10 MiB quoted-printable part over the parse budget: 554 5.6.0 naming the budget, nothing stored, /healthz within 250 ms', async () => {
  const raw = qpMessage({ From: 'App <app@example.com>', To: 'ann@example.net', Subject: 'QP' });
  const { result: reply, worst } = await whileProbing(url, 'QP 10 MiB to the sink', () => deliver(raw));
  assert.equal(reply.code, 554, reply.text);
  assert.match(reply.text, /^554 5\.6\.0 .*parse time budget \(3 s\)/);
  assert.equal(await stored(), 0);
  assert.ok(worst < HEALTHZ_BOUND_MS, `slowest /healthz ${Math.round(worst)} ms`);
});

test('an ordinary message after one over budget is caught: the stopped thread was replaced', async () => {
  const reply = await deliver(Buffer.from('From: App <app@example.com>\r\nTo: ann@example.net\r\nSubject: fine\r\n\r\nHello.\r\n'));
  assert.equal(reply.code, 250, reply.text);
  const id = caughtId(reply.text);
  const [row] = await ctx.sql`select subject, text from sink_messages where id = ${id} and project_id = ${projectId}`;
  assert.deepEqual({ ...row }, { subject: 'fine', text: 'Hello.\n\n' });
});

test('a budget an ordinary message cannot meet refuses it the same way', async () => {
  // A millisecond: parsing 4 MB of ordinary text takes longer.
  await setMimeBudget({ timeMs: 1 });
  try {
    const body = 'An ordinary line of text.\r\n'.repeat(150_000);
    const reply = await deliver(Buffer.from(`From: App <app@example.com>\r\nTo: ann@example.net\r\nSubject: long\r\n\r\n${body}`));
    assert.match(reply.text, /^554 5\.6\.0 .*parse time budget \(0\.001 s\)/);
    assert.equal(await stored(), 1, 'only the ordinary message before');
  } finally {
    await setMimeBudget({ timeMs: 3_000 });
  }
});
