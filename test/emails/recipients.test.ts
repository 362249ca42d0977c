import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { applyRetention } from '../../src/retention/apply.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { assertDerivedMatchBaseRows } from '../helpers/derived.ts';
import { browser, signIn } from '../dashboard/client.ts';
import { newId } from '../../src/platform/ids.ts';

const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
const a = await ctx.tenant('a');
const b = await ctx.tenant('b');

type Page = { data: { id: string; to: string[] }[]; has_more: boolean };
const send = async (key: string, body: Record<string, unknown>) => {
  const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', subject: 's', text: 't', ...body } });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
};
const list = async (key: string, query: string) => {
  const res = await ctx.call(key, `/v1/emails?${query}`);
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()) as Page;
};

test('?to= finds the emails that had the address in to, cc or bcc, exact and case-insensitive, newest first, paged', async () => {
  const toAnn = await send(a.key, { to: '"Ann Lee" <Ann@Example.NET>' });
  const ccAnn = await send(a.key, { to: 'bob@example.net', cc: ['ann@example.net'] });
  const bccAnn = await send(a.key, { to: 'bob@example.net', bcc: 'ANN@example.net' });
  const notAnn = await send(a.key, { to: ['anne@example.net', 'nn@example.net', 'ann@example.org'] });
  const twice = await send(a.key, { to: 'ann@example.net', cc: 'Ann@example.net' });
  const batch = await ctx.call(a.key, '/v1/emails/batch', { method: 'POST', body: [{ from: 'app@acme.test', to: 'carl@example.net', bcc: 'ann@example.net', subject: 's', text: 't' }] });
  assert.equal(batch.status, 201);
  const batched = ((await batch.json()) as { data: { id: string }[] }).data[0]!.id;
  await send(b.key, { to: 'ann@example.net' });

  const all = await list(a.key, 'to=ann@example.net');
  assert.deepEqual(all.data.map((e) => e.id), [batched, twice, bccAnn, ccAnn, toAnn], 'each once, newest first; never anne@, nn@ or another domain');
  assert.equal(all.has_more, false);
  assert.ok(!all.data.some((e) => e.id === notAnn));
  assert.deepEqual((await list(a.key, `to=${encodeURIComponent('ANN@EXAMPLE.NET')}`)).data.map((e) => e.id), all.data.map((e) => e.id));
  assert.deepEqual((await list(a.key, 'to=Ann%40example.net')).data.length, 5);
  assert.deepEqual((await list(a.key, 'to=anne@example.net')).data.map((e) => e.id), [notAnn]);
  assert.deepEqual((await list(a.key, 'to=nobody@example.net')).data, []);

  // The usual paging.
  const first = await list(a.key, 'to=ann@example.net&limit=2');
  assert.deepEqual(first.data.map((e) => e.id), [batched, twice]);
  assert.equal(first.has_more, true);
  const second = await list(a.key, `to=ann@example.net&limit=2&starting_after=${twice}`);
  assert.deepEqual(second.data.map((e) => e.id), [bccAnn, ccAnn]);
  const last = await list(a.key, `to=ann@example.net&limit=2&starting_after=${ccAnn}`);
  assert.deepEqual(last.data.map((e) => e.id), [toAnn]);
  assert.equal(last.has_more, false);
  // With the other filters.
  assert.deepEqual((await list(a.key, 'to=ann@example.net&status=failed')).data, []);
  assert.equal((await list(a.key, 'to=ann@example.net&status=queued')).data.length + (await list(a.key, 'to=ann@example.net&status=sent')).data.length, 5);
});

test('?to= keeps to the key\'s project, wants a full key, and answers 422 to what is not an address', async () => {
  const ofB = await list(b.key, 'to=ann@example.net');
  assert.equal(ofB.data.length, 1);
  const foreign = ofB.data[0]!.id;
  assert.equal((await ctx.call(a.key, `/v1/emails?to=ann@example.net&starting_after=${foreign}`)).status, 404);
  for (const bad of ['', 'ann', 'ann@', '@example.net', 'a b@example.net', 'x'.repeat(321)]) {
    const res = await ctx.call(a.key, `/v1/emails?to=${encodeURIComponent(bad)}`);
    assert.equal(res.status, 422, bad);
    const body = (await res.json()) as { detail: { loc: string[] }[] };
    assert.deepEqual(body.detail[0]!.loc, ['query', 'to'], bad);
  }
  const sending = await createApiKey(ctx.sql, a.projectId, 'sender', 'sending');
  assert.equal((await ctx.call(sending.key, '/v1/emails?to=ann@example.net')).status, 403);
});

test('retention and stats rebuild keep the recipient entries equal to the emails\' addresses', async () => {
  await assertDerivedMatchBaseRows(ctx.sql, 'after sends');
  // An old email loaded by hand, outside the day partitions' reach of retention's row steps.
  const t = await ctx.tenant('old');
  const id = newId('email');
  await ctx.sql`insert into emails (id, project_id, status, from_address, to_addresses, cc_addresses, subject, text, created_at)
    values (${id}, ${t.projectId}, 'sent', 'a@x.test', ${['Old <Old@Example.net>']}, ${['cc@example.net']}, 's', 't', now() - interval '200 days')`;
  await assert.rejects(assertDerivedMatchBaseRows(ctx.sql, 'loaded by hand'));
  await rebuildStats(ctx.sql);
  await assertDerivedMatchBaseRows(ctx.sql, 'after rebuild');
  assert.deepEqual((await list(t.key, 'to=old@example.net')).data.map((e) => e.id), [id]);
  await applyRetention(ctx.sql, { retentionDays: 90, bodyRetentionDays: 30 });
  assert.deepEqual((await list(t.key, 'to=old@example.net')).data, []);
  await assertDerivedMatchBaseRows(ctx.sql, 'after retention');
  // The day the removed email's address was listed on goes at the next rebuild.
  const days = async () => (await ctx.sql`select address from recipient_days where project_id = ${t.projectId} order by 1`).map((r) => r.address);
  assert.deepEqual(await days(), ['cc@example.net', 'old@example.net']);
  await rebuildStats(ctx.sql);
  assert.deepEqual(await days(), []);
});

test('dashboard: the Emails page has a recipient search box that finds the same emails', async () => {
  const br = browser(ctx);
  await signIn(br);
  const P = `/dashboard/projects/${a.projectId}/emails`;
  const page = await br.get(P);
  assert.match(page.text, /<input type="search" name="to"/);
  const found = await br.get(`${P}?to=${encodeURIComponent(' Ann@Example.net ')}`);
  assert.equal(found.res.status, 200);
  const ids = [...found.text.matchAll(/href="[^"]*\/emails\/(email_[0-9A-Z]{26})"/g)].map((m) => m[1]);
  assert.deepEqual(ids, (await list(a.key, 'to=ann@example.net')).data.map((e) => e.id));
  assert.match(found.text, /value="Ann@Example.net"/);
  const bad = await br.get(`${P}?to=not-an-address`);
  assert.equal(bad.res.status, 422);
  assert.match(bad.text, /A recipient is an email address/);
});
