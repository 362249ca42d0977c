import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { PARTITIONED_TABLES, PARTITION_DAYS_AHEAD } from '../../src/retention/partitions.ts';

// §18.7: accepts never depend on a worker's upkeep.
const ctx = await createTestContext();
const sql = ctx.sql;
const DAY_MS = 86_400_000;
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const suffix = (day: string) => `_p${day.replaceAll('-', '')}`;

test('with every partition from today on gone (days without a worker), the API still accepts: single, batch, with a key', async () => {
  const t = await ctx.tenant('no worker for ten days');
  // As ten days without a worker leave it: no partition for today or any day after.
  for (let i = 0; i <= PARTITION_DAYS_AHEAD; i++) {
    const day = utcDay(Date.now() + i * DAY_MS);
    await sql.unsafe(PARTITIONED_TABLES.map((x) => `drop table if exists ${x}${suffix(day)}`).join(';'));
  }
  const body = { from: 'app@acme.test', to: 'x@example.net', subject: 's', text: 't', tags: [{ name: 'k', value: 'v' }] };
  const one = await ctx.call(t.key, '/v1/emails', { method: 'POST', body });
  assert.equal(one.status, 201, await one.clone().text());
  const { id } = (await one.json()) as { id: string };
  const [where] = await sql`select tableoid::regclass::text as part from emails where id = ${id}`;
  assert.equal(where!.part, `emails${suffix(utcDay(Date.now()))}`);

  // Each way in, with the day made again between them by hand removal.
  const drop = () => sql.unsafe(PARTITIONED_TABLES.map((x) => `drop table if exists ${x}${suffix(utcDay(Date.now()))}`).join(';'));
  await sql`delete from emails where id = ${id}`;
  await sql`delete from email_tags where email_id = ${id}`;
  await sql`delete from email_recipients where email_id = ${id}`;
  await drop();
  const keyed = await ctx.call(t.key, '/v1/emails', { method: 'POST', body, headers: { 'idempotency-key': 'k-1' } });
  assert.equal(keyed.status, 201, await keyed.clone().text());
  const again = await ctx.call(t.key, '/v1/emails', { method: 'POST', body, headers: { 'idempotency-key': 'k-1' } });
  assert.equal(again.status, 201);
  assert.equal(((await again.json()) as { id: string }).id, ((await keyed.json()) as { id: string }).id);

  await sql`delete from idempotency_keys where project_id = ${t.projectId}`;
  await sql`delete from email_tags where project_id = ${t.projectId}`;
  await sql`delete from email_recipients where project_id = ${t.projectId}`;
  await sql`delete from emails where project_id = ${t.projectId}`;
  await drop();
  const batch = await ctx.call(t.key, '/v1/emails/batch', { method: 'POST', body: [body, body] });
  assert.equal(batch.status, 201, await batch.clone().text());
  const list = await ctx.call(t.key, '/v1/emails?tag=k:v');
  assert.equal(list.status, 200);
  assert.equal(((await list.json()) as { data: unknown[] }).data.length, 2);
});
