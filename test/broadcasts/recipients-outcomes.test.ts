import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { seedTopic, setSubscription } from './fixtures.ts';
import { getBroadcast, recipientsPage, type RecipientType } from '../../src/broadcasts/queries.ts';
import { idFloor, newId } from '../../src/platform/ids.ts';

// §23.3: `recipients?type=bounced|complained|unsubscribed` of a large broadcast with few such
// recipients reads those few, from the outcome's own index, not every recipient in contact order.

const ctx = await createTestContext();
const N = 20_000;

/** A sent broadcast of N recipients (rows written as its pages would), `bounced` and `complained` events on a few. */
async function seed(topic: boolean) {
  const { projectId, key } = await ctx.tenant(`outcomes-${topic}`);
  const segmentId = newId('segment');
  const topicId = topic ? await seedTopic(ctx.sql, projectId, 'opt_in') : null;
  const id = newId('broadcast');
  const tag = topic ? 't' : 'n';
  const contact = (i: number) => `contact_${tag}${String(i).padStart(25, '0')}`;
  const prefix = idFloor('email', Date.now()).slice(0, -9);
  const email = (i: number) => `${prefix}${String(i).padStart(9, '0')}`;
  await ctx.sql`insert into segments (id, project_id, name) values (${segmentId}, ${projectId}, 's')`;
  await ctx.sql`insert into contacts (id, project_id, email, unsubscribed)
    select 'contact_' || ${tag} || lpad(i::text, 25, '0'), ${projectId}, 'c' || i || '@example.test', i in (7, 15000) from generate_series(1, ${N}) i`;
  await ctx.sql`insert into broadcasts (id, project_id, name, segment_id, topic_id, from_address, subject, html, status, snapshot_at, sent_at, recipients)
    values (${id}, ${projectId}, 'big', ${segmentId}, ${topicId}, 'a@example.test', 's', '<p>x</p>', 'sent', now() - interval '1 minute', now(), ${N})`;
  await ctx.sql`insert into broadcast_recipients (broadcast_id, contact_id, project_id, email, email_id)
    select ${id}, 'contact_' || ${tag} || lpad(i::text, 25, '0'), ${projectId}, 'c' || i || '@example.test', ${prefix} || lpad(i::text, 9, '0')
    from generate_series(1, ${N}) i`;
  const events = [...[100, 9000, 19999].map((i) => [i, 'email.bounced'] as const), [9000, 'email.bounced'] as const, [12345, 'email.complained'] as const];
  for (const [i, type] of events) {
    await ctx.sql`insert into events (id, project_id, email_id, type, data) values (${newId('event')}, ${projectId}, ${email(i)}, ${type}, '{}')`;
  }
  // Bounces of the project's other mail since (2,000 of them) are no recipient's: the planner must
  // not take them as spread over the broadcast and walk its recipients in order to meet them.
  await ctx.sql`insert into events (id, project_id, email_id, type, data)
    select 'evt_' || ${tag} || lpad(i::text, 25, '0'), ${projectId}, ${prefix} || 'x' || lpad(i::text, 8, '0'), 'email.bounced', '{}'
    from generate_series(1, 2000) i`;
  if (topicId) await setSubscription(ctx.sql, projectId, contact(500), topicId, 'opt_out');
  await ctx.sql`analyze broadcast_recipients`;
  await ctx.sql`analyze contacts`;
  await ctx.sql`analyze events`;
  return { projectId, key, id, contact };
}

type Plan = { 'Relation Name'?: string; 'Actual Rows'?: number; 'Actual Loops'?: number; 'Rows Removed by Filter'?: number; Plans?: Plan[] };
/** Rows the statement's scans read (returned, and read then filtered out), of one table or of all. */
function rowsRead(plan: Plan, table?: string): number {
  const own = plan['Relation Name'] && (!table || plan['Relation Name'] === table)
    ? ((plan['Actual Rows'] ?? 0) + (plan['Rows Removed by Filter'] ?? 0)) * (plan['Actual Loops'] ?? 1) : 0;
  return own + (plan.Plans ?? []).reduce((n, p) => n + rowsRead(p, table), 0);
}

async function pageAndCost(projectId: string, id: string, type: RecipientType, startingAfter?: string) {
  const b = (await getBroadcast(ctx.sql, projectId, id))!;
  const query = recipientsPage(ctx.sql, b, type, { limit: 2, startingAfter });
  const rows = await query;
  const { statement, parameters } = query as unknown as { statement: { string: string }; parameters: unknown[] };
  const [explained] = await ctx.sql.unsafe(`explain (analyze, format json) ${statement.string}`, parameters as never[]);
  const plan = (explained as Record<string, [{ Plan: Plan }]>)['QUERY PLAN']![0].Plan;
  return { contacts: rows.map((r) => r.contactId), read: rowsRead(plan), recipientsRead: rowsRead(plan, 'broadcast_recipients') };
}

test('bounced, complained and unsubscribed: the right recipients, paged, each page reading only them', async () => {
  const { projectId, key, id, contact } = await seed(false);
  const first = await pageAndCost(projectId, id, 'bounced');
  assert.deepEqual(first.contacts, [contact(100), contact(9000), contact(19999)], 'limit 2, plus one to tell there is more');
  // It reads the project's bounces since the broadcast began (2,004) and one recipient for each
  // of its own, never the broadcast's 20,000 recipients in order.
  assert.ok(first.recipientsRead <= 10, `recipient rows read: ${first.recipientsRead}, of ${N}`);
  assert.ok(first.read <= 2_100, `rows read: ${first.read}`);
  const next = await pageAndCost(projectId, id, 'bounced', contact(9000));
  assert.deepEqual(next.contacts, [contact(19999)]);
  const complained = await pageAndCost(projectId, id, 'complained');
  assert.deepEqual(complained.contacts, [contact(12345)]);
  assert.ok(complained.read <= 10, `complained read ${complained.read}`);
  const unsubscribed = await pageAndCost(projectId, id, 'unsubscribed');
  assert.deepEqual(unsubscribed.contacts, [contact(7), contact(15000)]);
  assert.ok(unsubscribed.read <= 10, `unsubscribed read ${unsubscribed.read}`);

  // Through the route: the same recipients and the same paging.
  const res = await ctx.call(key, `/v1/broadcasts/${id}/recipients?type=bounced&limit=2`);
  assert.equal(res.status, 200);
  const body = (await res.json()) as { data: { contact_id: string }[]; has_more: boolean };
  assert.deepEqual(body.data.map((r) => r.contact_id), [contact(100), contact(9000)]);
  assert.equal(body.has_more, true);
  const counts = ((await (await ctx.call(key, `/v1/broadcasts/${id}`)).json()) as { counts: Record<string, number> }).counts;
  assert.equal(counts.unsubscribed, 2);
});

test('with a topic, unsubscribed also lists who opted out of it', async () => {
  const { projectId, id, contact } = await seed(true);
  const page = await pageAndCost(projectId, id, 'unsubscribed');
  assert.deepEqual(page.contacts, [contact(7), contact(500), contact(15000)]);
  assert.ok(page.read <= 10, `read ${page.read}`);
});
