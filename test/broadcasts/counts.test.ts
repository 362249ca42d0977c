import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { seedSegment } from './fixtures.ts';
import { advance, broadcastCounts, getBroadcast } from '../../src/broadcasts/queries.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { newId } from '../../src/platform/ids.ts';

// §23.3: a broadcast's counts are counters (broadcast_counts), kept by the page writer and by a
// trigger on the broadcast's emails, so GET /v1/broadcasts/{id} costs the same at any size. Here
// they are checked against a recount of the emails after random changes made the ways the service
// makes them (claims, sends, failures, requeues, cancels, deliveries, opens, clicks), from several
// connections at once; `stats rebuild` puts right counters that drifted.
const ctx = await createTestContext();
const { projectId } = await ctx.tenant('bc-counts');
const N = 300;

async function seed(prefix: string) {
  const { segmentId, contactIds } = await seedSegment(ctx.sql, projectId, N, prefix);
  const id = newId('broadcast');
  await ctx.sql`insert into broadcasts (id, project_id, name, segment_id, from_address, subject, html, status, snapshot_at)
    values (${id}, ${projectId}, 'counted', ${segmentId}, 'a@example.test', 's', '<p>x</p>', 'sending', now())`;
  // As the page writer does: the page's emails and recipients, then its tallies and counters.
  const emailIds = contactIds.slice(0, N - 2).map(() => newId('email'));
  await ctx.sql`
    insert into emails (id, project_id, status, from_address, to_addresses, subject, html, broadcast_id)
    select e, ${projectId}, 'queued', 'a@example.test', array['c@example.test'], 's', '<p>x</p>', ${id} from unnest(${emailIds}::text[]) e`;
  await ctx.sql`
    insert into broadcast_recipients (broadcast_id, contact_id, project_id, email, email_id, skipped)
    select ${id}, c, ${projectId}, 'c@example.test', e, case when e is null then 'too_large' end
    from unnest(${contactIds}::text[], ${emailIds}::text[]) as t(c, e)`;
  await ctx.sql.begin(async (tx) => advance(tx, (await getBroadcast(tx, projectId, id))!, null, { queued: N - 2, tooLarge: 2, suppressed: 0 }, true));
  return { id, emailIds };
}

/** The counts recounted from the broadcast's rows, as the old grouped read did. */
async function recount(id: string) {
  const [row] = await ctx.sql<[Record<string, number>]>`
    select count(*) filter (where status in ('queued', 'sending', 'scheduled'))::int as queued,
      count(*) filter (where status = 'sent')::int as sent,
      count(*) filter (where delivered_at is not null)::int as delivered,
      count(*) filter (where opened_at is not null)::int as opened,
      count(*) filter (where clicked_at is not null)::int as clicked,
      count(*) filter (where status = 'failed')::int
        + (select count(*)::int from broadcast_recipients where broadcast_id = ${id} and project_id = ${projectId} and skipped = 'too_large') as failed
    from emails where broadcast_id = ${id} and project_id = ${projectId}`;
  return row;
}

async function counted(id: string) {
  const c = await broadcastCounts(ctx.sql, (await getBroadcast(ctx.sql, projectId, id))!);
  return { queued: c.queued, sent: c.sent, delivered: c.delivered, opened: c.opened, clicked: c.clicked, failed: c.failed };
}

/** A small deterministic generator, so a failing round can be told again. */
function random(seed: number) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

// The changes the service makes to an email, each as one statement on the email's row.
const CHANGES = [
  (id: string) => ctx.sql`update emails set status = 'sending', attempt_count = attempt_count + 1 where id = ${id} and project_id = ${projectId} and status = 'queued'`,
  (id: string) => ctx.sql`update emails set status = 'sent', sent_at = now() where id = ${id} and project_id = ${projectId} and status = 'sending'`,
  (id: string) => ctx.sql`update emails set status = 'sent', sent_at = now(), delivered_at = now() where id = ${id} and project_id = ${projectId} and status = 'sending'`,
  (id: string) => ctx.sql`update emails set status = 'failed', last_error = 'x' where id = ${id} and project_id = ${projectId} and status = 'sending'`,
  (id: string) => ctx.sql`update emails set status = 'queued' where id = ${id} and project_id = ${projectId} and status = 'sending'`,
  (id: string) => ctx.sql`update emails set status = 'canceled' where id = ${id} and project_id = ${projectId} and status in ('queued', 'scheduled')`,
  (id: string) => ctx.sql`update emails set delivered_at = coalesce(delivered_at, now()) where id = ${id} and project_id = ${projectId} and status = 'sent'`,
  (id: string) => ctx.sql`update emails set opened_at = coalesce(opened_at, now()) where id = ${id} and project_id = ${projectId} and status = 'sent'`,
  (id: string) => ctx.sql`update emails set clicked_at = coalesce(clicked_at, now()), opened_at = coalesce(opened_at, now()) where id = ${id} and project_id = ${projectId} and status = 'sent'`,
  (id: string) => ctx.sql`update emails set lease_expires_at = now() + interval '1 minute' where id = ${id} and project_id = ${projectId}`,
];

test('counts equal a recount of the emails after random changes from several connections; the page writer counts queued and too_large', async () => {
  const { id, emailIds } = await seed('a');
  assert.deepEqual(await counted(id), { queued: N - 2, sent: 0, delivered: 0, opened: 0, clicked: 0, failed: 2 });
  const next = random(23);
  for (let round = 0; round < 6; round++) {
    // 400 changes, ten at a time over the pool's connections (so several shards of each metric).
    const changes = Array.from({ length: 400 }, () => [emailIds[Math.floor(next() * emailIds.length)]!, CHANGES[Math.floor(next() * CHANGES.length)]!] as const);
    for (let i = 0; i < changes.length; i += 10) await Promise.all(changes.slice(i, i + 10).map(([email, change]) => change(email)));
    assert.deepEqual(await counted(id), await recount(id), `round ${round}`);
  }
  const [{ shards }] = await ctx.sql<[{ shards: number }]>`select count(distinct shard)::int as shards from broadcast_counts where broadcast_id = ${id}`;
  assert.ok(shards > 1, `connections that counted: ${shards}`);
  // The counters are read with the project in the where: under another project's id, none.
  const other = await ctx.tenant('bc-counts-other');
  const foreign = await broadcastCounts(ctx.sql, { ...(await getBroadcast(ctx.sql, projectId, id))!, projectId: other.projectId });
  assert.deepEqual([foreign.queued, foreign.sent, foreign.failed], [0, 0, 0]);
});

test('the counts are read from the counters, and stats rebuild puts drifted counters right', async () => {
  const { id, emailIds } = await seed('b');
  await ctx.sql`update emails set status = 'sent', sent_at = now(), delivered_at = now() where id in ${ctx.sql(emailIds.slice(0, 100))} and project_id = ${projectId}`;
  const before = await counted(id);
  assert.deepEqual(before, { queued: N - 102, sent: 100, delivered: 100, opened: 0, clicked: 0, failed: 2 });
  // Counters moved by hand, one removed: the reading shows them, so it reads no email.
  await ctx.sql`update broadcast_counts set n = n + 7 where broadcast_id = ${id} and metric = 'sent'`;
  await ctx.sql`delete from broadcast_counts where broadcast_id = ${id} and metric = 'too_large'`;
  assert.deepEqual(await counted(id), { ...before, sent: 107, failed: 0 });
  assert.ok(await rebuildStats(ctx.sql) > 0);
  assert.deepEqual(await counted(id), before);
  assert.deepEqual(await counted(id), await recount(id));
});

test('the page writer\'s lock on its broadcast does not hold sends recording two copies in one transaction', async () => {
  // The second counter update of a transaction re-checks the counter row's key against the
  // broadcast (its row was written by this transaction): a key-share lock, which FOR UPDATE on
  // the broadcast refuses until the page is made and FOR NO KEY UPDATE lets through.
  const { id, emailIds } = await seed('lock');
  const [first, second] = emailIds;
  await ctx.sql`update emails set status = 'sending' where id = any(${[first!, second!]}) and project_id = ${projectId}`;
  let releasePage!: () => void;
  const pageHeld = new Promise<void>((resolve) => { releasePage = resolve; });
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => { locked = resolve; });
  const pageWriter = ctx.sql.begin(async (tx) => {
    await getBroadcast(tx, projectId, id, true);
    locked();
    await pageHeld;
  });
  try {
    await lockTaken;
    const started = performance.now();
    const sends = ctx.sql.begin(async (tx) => {
      for (const email of [first!, second!]) {
        await tx`update emails set status = 'sent', sent_at = now(), delivered_at = now() where id = ${email} and project_id = ${projectId} and status = 'sending'`;
      }
    }).then(() => performance.now() - started);
    // Held, they would wait for the page: the page is let go after a second either way.
    const waited = await Promise.race([sends, new Promise<number>((resolve) => setTimeout(() => resolve(Infinity), 1000))]);
    releasePage();
    await sends;
    assert.ok(waited < 1000, `two sends recorded together waited ${waited} ms for the page writer`);
  } finally {
    releasePage();
    await pageWriter;
  }
  assert.deepEqual(await counted(id), await recount(id));
});
