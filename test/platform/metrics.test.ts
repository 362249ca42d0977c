import { test } from 'node:test';
import assert from 'node:assert/strict';
// @ts-expect-error: the parser ships no types
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { spawnEntry } from '../helpers/process.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { freePort } from '../helpers/worker-process.ts';
import { waitFor } from '../helpers/wait.ts';
import { ses, sentEmail } from '../events/fixtures.ts';
import { ingestSesRecord } from '../../src/events/ingest.ts';
import { createLogger } from '../../src/platform/log.ts';
import { testRedisUrl } from '../helpers/redis.ts';

type Family = { name: string; type: string; metrics: Array<{ labels?: Record<string, string>; value?: string; count?: string; buckets?: Record<string, string> }> };

const ctx = await createTestContext({ env: { METRICS_TOKEN: 'scrape-token-0123456789' } });
const auth = { authorization: 'Bearer scrape-token-0123456789' };
const { key, projectId } = await ctx.tenant();

let lastText = '';
async function scrape(): Promise<Map<string, Family>> {
  const res = await ctx.app.request('/metrics', { headers: auth });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  lastText = await res.text();
  const families = parsePrometheusTextFormat(lastText) as Family[];
  return new Map(families.map((f) => [f.name, f]));
}

/** A histogram's `_count` for one label set; the parser keeps only the buckets of histograms. */
function histogramCount(name: string, labels: string): number {
  const line = lastText.split('\n').find((l) => l.startsWith(`${name}_count{${labels}}`));
  return Number(line?.split(' ').at(-1));
}

const sample = (families: Map<string, Family>, name: string, labels: Record<string, string>) =>
  families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));

test('after real traffic every family is exported with real values', async () => {
  const worker = await startTestWorker(ctx.config, ctx.sql);
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.test', subject: `m${i}`, text: 'hi' } });
    assert.equal(res.status, 201);
    ids.push(((await res.json()) as { id: string }).id);
  }
  await waitFor('the emails to reach the sink', async () => {
    const [row] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from emails where id = any(${ids}) and status = 'sent'`;
    return row.n === 3;
  });
  await worker.stop();
  assert.equal((await ctx.call(key, `/v1/emails/${ids[0]}`)).status, 200);
  const email = await sentEmail(ctx.sql, projectId);
  await ctx.sql.begin((tx) => ingestSesRecord(tx, createLogger('silent'), projectId, ses.bounce(email.providerMessageId, 'Permanent')));
  await ctx.sql`select graphile_worker.add_job('email__send', '{}'::json, run_at := now() + interval '1 hour', job_key := 'metrics-test')`;

  const m = await scrape();
  assert.ok(Number(sample(m, 'mailroom_http_requests_total', { method: 'POST', route: '/v1/emails', status: '201' })?.value) >= 3);
  assert.ok(Number(sample(m, 'mailroom_http_requests_total', { method: 'GET', route: '/v1/emails/:email_id', status: '200' })?.value) >= 1);
  assert.ok(histogramCount('mailroom_http_request_duration_seconds', 'method="POST",route="/v1/emails"') >= 3);
  assert.ok(Number(sample(m, 'mailroom_emails_total', { provider: 'sink', outcome: 'sent' })?.value) >= 3);
  assert.ok(histogramCount('mailroom_send_duration_seconds', 'provider="sink"') >= 3);
  assert.ok(Number(m.get('mailroom_sink_messages_total')?.metrics[0]?.value) >= 3);
  assert.equal(sample(m, 'mailroom_events_ingested_total', { type: 'email.bounced' })?.value, '1');
  assert.ok(Number(sample(m, 'mailroom_queue_jobs', { task: 'email__send', state: 'scheduled' })?.value) >= 1);
  assert.ok(m.get('process_cpu_user_seconds_total'), 'default process metrics');
  assert.ok(m.get('mailroom_webhook_deliveries_total'), 'declared even before the first delivery');
  for (const [name, type] of [['mailroom_http_requests_total', 'COUNTER'], ['mailroom_http_request_duration_seconds', 'HISTOGRAM'],
    ['mailroom_send_duration_seconds', 'HISTOGRAM'], ['mailroom_queue_jobs', 'GAUGE']] as const) {
    assert.equal(m.get(name)?.type, type, name);
  }
});

test('route labels are patterns: a thousand random paths add one series, not a thousand', async () => {
  for (let i = 0; i < 1000; i++) await ctx.app.request(`/no/such/${i}/${Math.random()}`);
  const series = (await scrape()).get('mailroom_http_requests_total')!.metrics;
  assert.ok(series.every((s) => !/\d\/0\./.test(s.labels?.route ?? '')), 'no raw path became a label');
  const unmatched = series.filter((s) => s.labels?.route === 'unmatched');
  assert.equal(unmatched.length, 1);
  assert.ok(Number(unmatched[0]!.value) >= 1000);
});

test('METRICS_TOKEN is required as a bearer token when set', async () => {
  assert.equal((await ctx.app.request('/metrics')).status, 401);
  assert.equal((await ctx.app.request('/metrics', { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status, 401);
  assert.equal((await ctx.app.request('/metrics', { headers: auth })).status, 200);
});

test('a worker process serves its metrics on METRICS_PORT', async () => {
  const { url } = await createTestDatabase();
  const port = await freePort();
  const worker = spawnEntry('src/worker.ts', {
    DATABASE_URL: url, SECRET_KEY: TEST_SECRET_KEY, REDIS_URL: (await testRedisUrl()) ?? 'redis://127.0.0.1:6379',
    HOST: '127.0.0.1', SINK_SMTP_PORT: '0', METRICS_PORT: String(port), LOG_LEVEL: 'info',
  });
  await worker.logLine('metrics listening');
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(res.status, 200);
  const families = new Map((parsePrometheusTextFormat(await res.text()) as Family[]).map((f) => [f.name, f]));
  assert.ok(families.get('process_resident_memory_bytes'));
  assert.ok(families.get('mailroom_queue_jobs'));
  assert.equal((await fetch(`http://127.0.0.1:${port}/elsewhere`)).status, 404);
  worker.child.kill('SIGTERM');
  assert.equal(await worker.exited, 0);
});
