import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { emitEvent, fakeDns } from './helpers.ts';

// §16.8: webhook flushes run in their own WEBHOOK_CONCURRENCY slots, apart from sends. Eight
// endpoints that answer late (here after 4 s, with a 5 s delivery timeout: the rule's 10 s scaled
// down to keep the suite fast) hold every one of the default 8 worker slots under a shared pool.
const SLOW_MS = 4000;
const ctx = await createTestContext({ env: { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', WORKER_CONCURRENCY: '8' } });
assert.equal(ctx.config.webhookConcurrency, 4, 'WEBHOOK_CONCURRENCY defaults to 4');
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
const held = new Set<() => void>();
receiver.respond(async (_req, res) => {
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, SLOW_MS);
    held.add(() => { clearTimeout(timer); resolve(); });
  });
  if (!res.destroyed) res.writeHead(200).end('late');
});
after(() => { for (const release of held) release(); });
const dns = fakeDns({ 'hooks.test': ['127.0.0.1'] });
await startTestWorker(ctx.config, ctx.sql, { webhooks: { ca: tls.cert, resolve: dns.resolve, timeoutMs: SLOW_MS + 1000 } });

test('eight slow webhook endpoints do not delay a send by more than 1 s', async () => {
  const { projectId, key } = await ctx.tenant();
  const timedSend = async (subject: string) => {
    const accepted = Date.now();
    const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', subject, text: 'hi' } });
    assert.equal(res.status, 201);
    const { id } = await res.json() as { id: string };
    await waitFor('the send', async () => (await ctx.sql`select 1 from emails where id = ${id} and status in ('sent', 'delivered')`).length > 0, 15_000);
    return Date.now() - accepted;
  };
  // The same send with no webhook work, on this machine at this moment: the delay is measured from it.
  const baselineMs = await timedSend('Before');
  for (let i = 0; i < 8; i++) {
    await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url(`/slow/${i}`, 'hooks.test'), { resolve: dns.resolve });
  }
  // One event: a flush job per endpoint, eight in all, each held by its endpoint.
  await emitEvent(ctx.sql, projectId);
  await waitFor('the slow endpoints to be called', async () => receiver.requests.length >= 4, 10_000);

  const tookMs = await timedSend('Now');
  // While the flushes still hold their slots: at most WEBHOOK_CONCURRENCY of them run at once.
  const inFlight = receiver.requests.length;
  console.log(JSON.stringify({ baseline_send_ms: baselineMs, send_ms: tookMs, webhook_requests_in_flight: inFlight }));
  assert.ok(tookMs - baselineMs < 1000, `the send took ${tookMs} ms behind slow webhooks, ${baselineMs} ms without them`);
  assert.ok(inFlight <= 4, `${inFlight} webhook requests at once`);
});
