import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import postgres from 'postgres';

type PlanNode = { 'Actual Rows'?: number; 'Index Name'?: string; 'Relation Name'?: string; 'Node Type': string; Plans?: PlanNode[] };

/** Every index the plan reads, and any table it scans whole (as `seq:<table>`). */
function indexesIn(node: PlanNode): string[] {
  // A partition that holds nothing costs nothing to scan, however it is scanned.
  if (node['Node Type'] === 'Seq Scan' && node['Actual Rows'] === 0) return [];
  const own = node['Index Name'] ? [node['Index Name']] : node['Node Type'] === 'Seq Scan' ? [`seq:${node['Relation Name']}`] : [];
  return [...own, ...(node.Plans ?? []).flatMap(indexesIn)];
}

// No worker here: the deliveries below are only ever claimed by the statement under test.
const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });

test('a claim takes the oldest deliveries through the index of unattempted ones and the primary key, and reads each with its endpoint and event through their primary keys, on tables without statistics', async () => {
  const t = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, t.projectId, 'http://127.0.0.1:9/hook');
  // A burst of events for one endpoint, just written: none attempted yet, no statistics gathered.
  await ctx.sql`
    with emails as (
      insert into emails (id, project_id, from_address, to_addresses, subject, text)
      select left(mailroom_id_floor('email_', now()), 16) || 'PLAN' || lpad(g::text, 12, '0'), ${t.projectId}::text, 'a@example.com', array['b@example.net'], 's', 't'
      from generate_series(1, 3200) g returning id),
    events as (
      insert into events (id, project_id, email_id, type)
      select replace(id, 'email_', 'evt_'), ${t.projectId}::text, id, 'email.delivered' from emails returning id, email_id)
    insert into webhook_deliveries (id, project_id, endpoint_id, event_id, email_id, status, attempt_count)
    select replace(id, 'evt_', 'whd_'), ${t.projectId}::text, ${endpoint.id}::text, id, email_id, 'pending', 0 from events`;
  // auto_explain reports the plan of the statement the function runs, as a notice to this session.
  const plans: PlanNode[] = [];
  const probe = postgres(ctx.url, {
    max: 1,
    onnotice: (notice) => {
      const json = /\{[\s\S]*\}/.exec(notice.message ?? '')?.[0];
      if (json && notice.message?.includes('with picked as')) plans.push((JSON.parse(json) as { Plan: PlanNode }).Plan);
    },
  });
  const rollback = new Error('rollback');
  let claimed: string[] = [];
  let rows: { id: string; url: string; type: string }[] = [];
  try {
    await probe.begin(async (tx) => {
      await tx`load 'auto_explain'`;
      await tx`set local auto_explain.log_min_duration = 0`;
      await tx`set local auto_explain.log_nested_statements = on`;
      await tx`set local auto_explain.log_format = json`;
      await tx`set local auto_explain.log_analyze = on`;
      await tx`set local auto_explain.log_level = notice`;
      // Prepared and run six times, so a plan the call itself kept would be generic by now.
      for (let i = 0; i < 6; i++) {
        rows = await tx<typeof rows>`select id, url, type from webhook_flush_claim(${endpoint.id}, ${t.projectId}, 60, 16)`;
        if (i < 5) await tx`update webhook_deliveries set leased_until = null where project_id = ${t.projectId}`;
      }
      claimed = (await tx<{ id: string }[]>`select id from webhook_deliveries where project_id = ${t.projectId} and leased_until is not null order by id`).map((r) => r.id);
      throw rollback;
    }).catch((err) => { if (err !== rollback) throw err; });
  } finally {
    await probe.end();
  }
  assert.ok(plans.length > 0, 'auto_explain reported the claim');
  // A partition's index is named for its partition: each is counted as the partitioned index it belongs to.
  const parents = new Map((await ctx.sql<{ child: string; parent: string }[]>`
    select c.relname as child, p.relname as parent from pg_inherits i
    join pg_class c on c.oid = i.inhrelid join pg_class p on p.oid = i.inhparent where c.relkind = 'i'`).map((r) => [r.child, r.parent]));
  const indexes = [...new Set(plans.flatMap(indexesIn).map((i) => parents.get(i) ?? i))].sort();
  const oldest = (await ctx.sql<{ id: string }[]>`select id from webhook_deliveries where project_id = ${t.projectId} order by id limit 16`).map((r) => r.id);
  assert.ok(oldest.every((id, i) => id.endsWith(`PLAN${String(1 + i).padStart(12, '0')}`)));
  assert.deepEqual(rows.map((r) => [r.id, r.url, r.type]), oldest.map((id) => [id, 'http://127.0.0.1:9/hook', 'email.delivered']), 'each with its endpoint and event');
  assert.deepEqual(claimed, oldest, 'the 16 oldest');
  // Nothing that walks the project's or the endpoint's whole history.
  // A table of one endpoint is read whole; what grows with every event is read only by key.
  // The event is found by its email and id in its email's partition; the claimed rows by primary key.
  assert.deepEqual(indexes.filter((i) => !i.includes('webhook_endpoints')), ['events_email_id_idx', 'webhook_deliveries_event_idx', 'webhook_deliveries_pkey', 'webhook_deliveries_unattempted_idx']);
});
