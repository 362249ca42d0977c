import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { addSuppressions } from '../../src/suppressions/queries.ts';

const ctx = await createTestContext();
const A = await ctx.tenant('A');
const B = await ctx.tenant('B');

type Item = { email: string; reason: string; created_at: string };

test('add, list with paging and the email filter, lift', async () => {
  const added = await ctx.call(A.key, '/v1/suppressions', { method: 'POST', body: { email: 'Ann <Ann@Example.NET>' } });
  assert.equal(added.status, 201);
  const item = (await added.json()) as Item;
  assert.equal(item.email, 'ann@example.net');
  assert.equal(item.reason, 'manual');
  assert.ok(Date.parse(item.created_at));
  const again = await ctx.call(A.key, '/v1/suppressions', { method: 'POST', body: { email: 'ann@example.net' } });
  assert.equal(again.status, 200, 'already there: the existing entry');

  await addSuppressions(ctx.sql, A.projectId, ['b1@example.net', 'b2@example.net', 'b3@example.net'], 'bounced');
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 5; i++) {
    const res = await ctx.call(A.key, `/v1/suppressions?limit=2${cursor ? `&starting_after=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200);
    const page = (await res.json()) as { data: Item[]; has_more: boolean };
    seen.push(...page.data.map((d) => d.email));
    if (!page.has_more) break;
    cursor = page.data.at(-1)!.email;
  }
  assert.deepEqual(seen.sort(), ['ann@example.net', 'b1@example.net', 'b2@example.net', 'b3@example.net']);
  const filtered = (await (await ctx.call(A.key, '/v1/suppressions?email=B2@example.net')).json()) as { data: Item[] };
  assert.deepEqual(filtered.data.map((d) => [d.email, d.reason]), [['b2@example.net', 'bounced']]);

  assert.equal((await ctx.call(A.key, '/v1/suppressions/b2%40example.net', { method: 'DELETE' })).status, 204);
  assert.equal((await ctx.call(A.key, '/v1/suppressions/b2%40example.net', { method: 'DELETE' })).status, 404, 'lifting what is not there is 404');
});

test('bad input is 422, unknown cursors 404, and another project\'s entries are invisible', async () => {
  for (const body of [{ email: 'not an address' }, { email: '' }, {}, { email: 42 }]) {
    const res = await ctx.call(A.key, '/v1/suppressions', { method: 'POST', body });
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.deepEqual(((await res.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc, ['body', 'email']);
  }
  assert.equal((await ctx.call(A.key, '/v1/suppressions', { method: 'POST', body: '{"email":' })).status, 422);
  assert.equal((await ctx.call(A.key, '/v1/suppressions?starting_after=nobody@example.net')).status, 404);
  await addSuppressions(ctx.sql, B.projectId, ['only-b@example.net'], 'complained');
  assert.deepEqual(((await (await ctx.call(A.key, '/v1/suppressions?email=only-b@example.net')).json()) as { data: Item[] }).data, []);
  const lift = await ctx.call(A.key, '/v1/suppressions/only-b%40example.net', { method: 'DELETE' });
  assert.equal(lift.status, 404, 'another project\'s suppression is not found, never 403');
  const [still] = await ctx.sql`select 1 from suppressions where project_id = ${B.projectId} and address = 'only-b@example.net'`;
  assert.ok(still);
});

test('a lifted address receives mail again; the email\'s events read back oldest first', async () => {
  const worker = await startTestWorker(ctx.config, ctx.sql);
  const send = async () => {
    const res = await ctx.call(A.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'Lifted@example.net', subject: 'Hi', text: 'hi' } });
    return ((await res.json()) as { id: string }).id;
  };
  const status = (id: string) => ctx.sql<[{ status: string; lastError: string | null }]>`select status, last_error from emails where id = ${id}`.then((r) => r[0]);
  await ctx.call(A.key, '/v1/suppressions', { method: 'POST', body: { email: 'lifted@example.net' } });
  const blocked = await send();
  await waitFor('the suppressed send to fail', async () => (await status(blocked)).status === 'failed');
  assert.equal((await status(blocked)).lastError, 'recipient_suppressed');

  assert.equal((await ctx.call(A.key, '/v1/suppressions/lifted%40example.net', { method: 'DELETE' })).status, 204);
  const delivered = await send();
  await waitFor('the send after lifting to go out', async () => (await status(delivered)).status === 'sent');
  await worker.stop();

  const events = await ctx.call(A.key, `/v1/emails/${delivered}/events`);
  assert.equal(events.status, 200);
  const { data } = (await events.json()) as { data: { id: string; type: string; created_at: string; data: Record<string, unknown> }[] };
  assert.deepEqual(data.map((e) => e.type), ['email.sent', 'email.delivered']);
  assert.match(data[0]!.id, /^evt_/);
  assert.deepEqual(data[0]!.data.to, ['Lifted@example.net']);
  const failedEvents = (await (await ctx.call(A.key, `/v1/emails/${blocked}/events`)).json()) as { data: { type: string; data: { reason: string } }[] };
  assert.deepEqual(failedEvents.data.map((e) => [e.type, e.data.reason]), [['email.failed', 'recipient_suppressed']]);
  assert.equal((await ctx.call(B.key, `/v1/emails/${delivered}/events`)).status, 404, 'another project\'s email');
});
