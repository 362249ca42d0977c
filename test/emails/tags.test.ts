import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { connectProvider } from '../../src/providers/connections.ts';

const ses = await startFakeSes();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: ses.url } });
const sink = await ctx.tenant('sink');
const viaSes = await ctx.tenant('ses');
await connectProvider(ctx.sql, ctx.config, { projectId: viaSes.projectId, region: 'eu-west-1', accessKeyId: 'AKIDTAGS', secretAccessKey: 's', sendQuota: { maxSendRate: 100, max24HourSend: 1000 } });
await startTestWorker(ctx.config, ctx.sql);

const tags = [{ name: 'category', value: 'receipt' }, { name: 'order_id', value: 'A-42' }];
const send = (k: string, extra: Record<string, unknown>) =>
  ctx.call(k, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', subject: 'Tagged', text: 'hi', ...extra } });

test('tags are stored, returned, carried in every event, sent to SES, and filter the list', async () => {
  const res = await send(sink.key, { tags });
  assert.equal(res.status, 201);
  const { id } = (await res.json()) as { id: string };
  await send(sink.key, { tags: [{ name: 'category', value: 'welcome' }] });
  const email = (await (await ctx.call(sink.key, `/v1/emails/${id}`)).json()) as { tags: unknown };
  assert.deepEqual(email.tags, tags);
  await waitFor('the sink send', async () => ((await (await ctx.call(sink.key, `/v1/emails/${id}`)).json()) as { status: string }).status === 'sent');
  const { data: events } = (await (await ctx.call(sink.key, `/v1/emails/${id}/events`)).json()) as { data: { type: string; data: { tags: unknown } }[] };
  assert.deepEqual(events.map((e) => e.type), ['email.sent', 'email.delivered']);
  for (const e of events) assert.deepEqual(e.data.tags, tags, e.type);

  const filtered = (await (await ctx.call(sink.key, '/v1/emails?tag=category:receipt')).json()) as { data: { id: string }[] };
  assert.deepEqual(filtered.data.map((e) => e.id), [id]);
  assert.deepEqual(((await (await ctx.call(sink.key, '/v1/emails?tag=category:none')).json()) as { data: unknown[] }).data, []);
  for (const bad of ['category', 'a b:c', ':x', 'x:']) {
    assert.equal((await ctx.call(sink.key, `/v1/emails?tag=${encodeURIComponent(bad)}`)).status, 422, bad);
  }

  const viaSesRes = await send(viaSes.key, { tags });
  const sesId = ((await viaSesRes.json()) as { id: string }).id;
  await waitFor('the SES send', async () => ses.requests.some((r) => r.raw.includes(sesId)));
  const request = ses.requests.find((r) => r.raw.includes(sesId)) as unknown as { EmailTags?: unknown };
  assert.deepEqual(request.EmailTags, [{ Name: 'category', Value: 'receipt' }, { Name: 'order_id', Value: 'A-42' }]);
});

test('bad tags are 422 naming the tag', async () => {
  const cases: [unknown, (string | number)[]][] = [
    [[{ name: 'has space', value: 'x' }], ['body', 'tags', 0, 'name']],
    [[{ name: 'a', value: 'x' }, { name: 'a', value: 'y' }], ['body', 'tags', 1, 'name']],
    [[{ name: 'a', value: '' }], ['body', 'tags', 0, 'value']],
    [Array.from({ length: 11 }, (_, i) => ({ name: `t${i}`, value: 'v' })), ['body', 'tags']],
    [[{ name: 'x'.repeat(257), value: 'v' }], ['body', 'tags', 0, 'name']],
  ];
  for (const [value, loc] of cases) {
    const res = await send(sink.key, { tags: value });
    assert.equal(res.status, 422, JSON.stringify(value).slice(0, 80));
    const { detail } = (await res.json()) as { detail: { loc: unknown[] }[] };
    assert.deepEqual(detail[0]!.loc, loc);
  }
});
