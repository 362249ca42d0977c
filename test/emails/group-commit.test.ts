import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate } from 'node:timers/promises';
import { createTestContext } from '../helpers/app.ts';
import { createSql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';
import { acceptQueued, announceQueued, recentBatchSizes } from '../../src/emails/accept.ts';
import type { NewEmail } from '../../src/emails/queries.ts';

const ctx = await createTestContext();
const alpha = await ctx.tenant('alpha');

const email = (projectId: string, subject = 'Hi'): NewEmail => ({
  id: newId('email'), projectId, from: 'app@acme.test', to: ['ann@example.test'], cc: [], bcc: [], replyTo: [],
  subject, html: null, text: 'Hello', headers: {}, attachments: [],
});

async function rowsAndJobs(ids: string[]) {
  const rows = await ctx.sql<{ id: string; txid: string }[]>`select id, xmin::text as txid from emails where id = any(${ids})`;
  const jobs = await ctx.sql<{ key: string }[]>`select key from graphile_worker.jobs where key = any(${ids})`;
  return { rows, jobs };
}

test('concurrent sends share transactions, and each gets its row and its job', async () => {
  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) =>
    ctx.call(alpha.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.test', subject: `n${i}`, text: 'x' } })));
  const ids: string[] = [];
  for (const res of answers) {
    assert.equal(res.status, 201);
    ids.push(((await res.json()) as { id: string }).id);
  }
  assert.equal(new Set(ids).size, 40);
  const { rows, jobs } = await rowsAndJobs(ids);
  assert.equal(rows.length, 40);
  assert.equal(jobs.length, 40);
  const transactions = new Set(rows.map((r) => r.txid));
  assert.ok(transactions.size < 40, `40 sends took ${transactions.size} transactions`);
  assert.ok(recentBatchSizes(ctx.sql).some((n) => n > 1));
});

test('an email announced as arriving (an SMTP message being read) shares the transaction of one already waiting', async () => {
  const arriving = announceQueued(ctx.sql);
  const first = email(alpha.projectId, 'waiting');
  const second = email(alpha.projectId, 'arriving');
  const committed = [acceptQueued(ctx.sql, first)];
  // Its content arrives a turn later, after the waiting one would have gone alone: the batch
  // waits for it (up to 2 ms).
  await setImmediate();
  committed.push(acceptQueued(ctx.sql, second, arriving));
  assert.deepEqual(await Promise.all(committed), [first.id, second.id]);
  const { rows, jobs } = await rowsAndJobs([first.id, second.id]);
  assert.equal(jobs.length, 2);
  assert.equal(new Set(rows.map((r) => r.txid)).size, 1, 'one transaction for both');
});

test('one bad row fails alone: its neighbours in the batch are written', async () => {
  const good = Array.from({ length: 9 }, () => email(alpha.projectId));
  const bad = email(alpha.projectId, 'a NUL \u0000'); // PostgreSQL takes no NUL in text: the row is refused
  const outcomes = await Promise.allSettled([...good.slice(0, 4), bad, ...good.slice(4)].map((e) => acceptQueued(ctx.sql, e)));
  assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 9);
  assert.equal(outcomes[4]!.status, 'rejected');
  const { rows, jobs } = await rowsAndJobs([...good, bad].map((e) => e.id));
  assert.deepEqual(rows.map((r) => r.id).sort(), good.map((e) => e.id).sort());
  assert.equal(jobs.length, 9);
});

test('nothing is acknowledged before it is durable, even when the connection dies mid-batch', async () => {
  const victim = createSql(ctx.url, { max: 4, appName: 'group-commit-victim' });
  const waiting = () => ctx.sql<{ pid: number }[]>`
    select pid from pg_stat_activity where application_name = 'group-commit-victim' and wait_event_type = 'Lock'`;
  try {
    const emails = Array.from({ length: 30 }, () => email(alpha.projectId, 'kill'));
    let outcomes: PromiseSettledResult<string>[] = [];
    // A lock holds every insert mid-statement, so the batch (and then some of the one-by-one
    // retries) are killed while their transactions are open.
    await ctx.sql.begin(async (lock) => {
      await lock`lock table emails in share mode`;
      const settled = Promise.allSettled(emails.map((e) => acceptQueued(victim, e)));
      let kills = 0;
      for (let round = 0; round < 200 && kills < 6; round++) {
        const blocked = await waiting();
        for (const { pid } of blocked) {
          await ctx.sql`select pg_terminate_backend(${pid})`;
          kills++;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      assert.ok(kills > 0, 'a batch was killed while open');
      // The lock goes with this transaction; whatever is still waiting then goes through.
      outcomes = await Promise.race([settled, new Promise<never>((r) => setTimeout(r, 50)).then(() => [] as never)]) ?? [];
      void settled.then((o) => { outcomes = o; });
    });
    // postgres.js waits longer before each reconnect after connections that ended in an error
    // (seconds after a few in a row, on a loaded machine), so the last answers can take a while.
    for (let i = 0; i < 600 && outcomes.length < emails.length; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(outcomes.length, emails.length, 'every caller got an answer');
    const { rows, jobs } = await rowsAndJobs(emails.map((e) => e.id));
    const stored = new Set(rows.map((r) => r.id));
    const queued = new Set(jobs.map((j) => j.key));
    let refused = 0;
    emails.forEach((e, i) => {
      if (outcomes[i]!.status === 'fulfilled') {
        assert.ok(stored.has(e.id) && queued.has(e.id), 'an acknowledged email and its job exist');
      } else {
        refused++;
        assert.ok(!stored.has(e.id) && !queued.has(e.id), 'a refused email left nothing behind');
      }
    });
    assert.ok(refused > 0 && refused < emails.length, `some retries were killed too (${refused} refused)`);
  } finally {
    await victim.end({ timeout: 1 });
  }
});
