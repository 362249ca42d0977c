import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { CLAIM_STATEMENT } from '../../src/webhooks/flush.task.ts';

type PlanNode = { 'Index Name'?: string; 'Relation Name'?: string; 'Node Type': string; Plans?: PlanNode[] };

/** Every index the plan reads, and any table it scans whole (as `seq:<table>`). */
function indexesIn(node: PlanNode): string[] {
  const own = node['Index Name'] ? [node['Index Name']] : node['Node Type'] === 'Seq Scan' ? [`seq:${node['Relation Name']}`] : [];
  return [...own, ...(node.Plans ?? []).flatMap(indexesIn)];
}

// No worker here: the deliveries below are only ever claimed by the statement under test.
const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });

test('a claim takes the oldest deliveries through the index of unattempted ones and the primary key, planned generically without statistics', async () => {
  const t = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, t.projectId, 'http://127.0.0.1:9/hook');
  // A burst of events for one endpoint, just written: none attempted yet, no statistics gathered.
  await ctx.sql`
    with emails as (
      insert into emails (id, project_id, from_address, to_addresses, subject, text)
      select 'email_plan' || lpad(g::text, 5, '0'), ${t.projectId}::text, 'a@example.com', array['b@example.net'], 's', 't'
      from generate_series(1, 3200) g returning id),
    events as (
      insert into events (id, project_id, email_id, type)
      select replace(id, 'email_', 'evt_'), ${t.projectId}::text, id, 'email.delivered' from emails returning id)
    insert into webhook_deliveries (id, project_id, endpoint_id, event_id, status, attempt_count)
    select replace(id, 'evt_', 'whd_'), ${t.projectId}::text, ${endpoint.id}::text, id, 'pending', 0 from events`;
  const rollback = new Error('rollback');
  let indexes: string[] = [];
  let claimed: string[] = [];
  await ctx.sql.begin(async (tx) => {
    // The plan a prepared statement falls back to, made from no statistics at all.
    await tx`set local plan_cache_mode = force_generic_plan`;
    // Sent as a simple query, so its $n are the prepared statement's own parameters.
    await tx.unsafe(`prepare claim_probe as ${CLAIM_STATEMENT}`).simple();
    // EXECUTE takes no bound parameters; the ids are the test's own, made of safe characters.
    const [row] = await tx.unsafe(`explain (analyze, buffers, format json) execute claim_probe('${endpoint.id}', '${t.projectId}', 60, 16)`);
    const { Plan: plan } = (row as unknown as { 'QUERY PLAN': [{ Plan: PlanNode }] })['QUERY PLAN'][0];
    indexes = indexesIn(plan).sort();
    claimed = (await tx<{ id: string }[]>`select id from webhook_deliveries where project_id = ${t.projectId} and leased_until is not null order by id`).map((r) => r.id);
    throw rollback;
  }).catch((err) => { if (err !== rollback) throw err; });
  assert.deepEqual(claimed, Array.from({ length: 16 }, (_, i) => `whd_plan${String(1 + i).padStart(5, '0')}`), 'the 16 oldest');
  // Nothing that walks the project's or the endpoint's whole history.
  assert.deepEqual(indexes, ['webhook_deliveries_pkey', 'webhook_deliveries_unattempted_idx']);
});
