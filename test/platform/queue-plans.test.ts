import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { createSql } from '../../src/platform/db.ts';

const { url } = await createTestDatabase();

/**
 * Accepting mail calls graphile_worker.add_jobs on long-lived connections. A plan cached while
 * the jobs table was empty must not make every later call read the whole backlog.
 */
test('add_jobs on a connection that first ran against an empty queue does not scan the backlog', async () => {
  const sql = createSql(url, { max: 1, appName: 'mailroom-test' });
  try {
    const addJobs = (count: number) => sql`
      select count(*)::int as added from graphile_worker.add_jobs((
        select array_agg(row('mailroom_test_noop', '{}', null, null, null, null, null, null)::graphile_worker.job_spec)
        from generate_series(1, ${count}::int)))`;
    // Enough calls while the table is small for PostgreSQL to settle on a cached plan.
    for (let i = 0; i < 10; i++) await addJobs(1);
    await addJobs(20_000);

    const [reads] = await sql.begin(async (tx) => {
      await tx`select count(*) from graphile_worker.add_jobs(array[row('mailroom_test_noop', '{}', null, null, null, null, null, null)::graphile_worker.job_spec])`;
      return tx<[{ seqTupRead: number }]>`
        select seq_tup_read::int from pg_stat_xact_all_tables where relid = 'graphile_worker._private_jobs'::regclass`;
    });
    assert.ok(reads!.seqTupRead < 1_000, `one add_jobs call read ${reads!.seqTupRead} job rows sequentially`);
  } finally {
    await sql.end();
  }
});
