import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { encodeTime } from 'ulid';
import { createTestDatabase } from '../helpers/db.ts';
import { listEmails } from '../../src/emails/queries.ts';
import { ensurePartitions } from '../../src/retention/partitions.ts';
import { createSql } from '../../src/platform/db.ts';

const DAY = 86_400_000;

// A page is read window by window back in time (yesterday, 3, 7, 15, 31, 63 days, then older):
// pages that cross a window's edge, filtered or not, are exactly the rows in id order, for a busy
// project whose windows are read apart as for a quiet one whose windows are read as one.
test('pages cross the windows a list is read in: every email once, newest first, filters applied', async () => {
  const { sql } = await createTestDatabase();
  await ensurePartitions(sql, { from: new Date(Date.now() - 130 * DAY) });
  await sql`insert into projects (id, name) values ('proj_w', 'windows'), ('proj_busy', 'busy'), ('proj_other', 'other')`;
  await sql`
    insert into project_daily_counts (project_id, day, metric, shard, n)
    select 'proj_busy', (now() at time zone 'UTC')::date - d, 'email.sent', 0, 3000 from generate_series(0, 130) d`;
  const today = Math.floor(Date.now() / DAY) * DAY;
  // Each side of every window edge, and far back.
  const ages = [0, 1, 2, 3, 6, 7, 8, 14, 15, 16, 30, 31, 32, 62, 63, 64, 100, 120].flatMap((d) => [today - d * DAY + 1, today - d * DAY - 1]);
  const base = ages.filter((ms) => ms <= Date.now()).map((ms, i) => ({
    id: `email_${encodeTime(ms, 10)}${randomBytes(8).toString('hex').toUpperCase()}`,
    status: i % 3 === 0 ? 'failed' : 'sent',
    tag: i % 2 === 0 ? 'even' : 'odd',
    at: new Date(ms),
  }));
  // The same emails in each project, each id's last character its project's.
  const rowsOf = (project: string) => base.map((r) => ({ ...r, id: r.id.slice(0, -1) + { proj_w: 'W', proj_busy: 'X', proj_other: 'Z' }[project]! }));
  for (const project of ['proj_w', 'proj_busy', 'proj_other']) {
    for (const r of rowsOf(project)) {
      await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, tags, created_at)
        values (${r.id}, ${project}, ${r.status}, 'a@x.test', ${['b@x.test']}, 's', 't', ${sql.json([{ name: 'k', value: r.tag }])}, ${r.at})`;
      await sql`insert into email_tags (project_id, name, value, email_id) values (${project}, 'k', ${r.tag}, ${r.id})`;
    }
  }
  for (const project of ['proj_w', 'proj_busy']) {
    const expected = rowsOf(project).sort((a, b) => (a.id < b.id ? 1 : -1));
    const cases: Array<[string, Parameters<typeof listEmails>[2] extends infer O ? Omit<O & object, 'limit' | 'startingAfter'> : never, typeof expected]> = [
      ['all', {}, expected],
      ['status', { status: 'failed' }, expected.filter((r) => r.status === 'failed')],
      ['tag', { tag: { name: 'k', value: 'even' } }, expected.filter((r) => r.tag === 'even')],
      ['tag and status', { tag: { name: 'k', value: 'odd' }, status: 'sent' }, expected.filter((r) => r.tag === 'odd' && r.status === 'sent')],
    ];
    for (const [name, filter, want] of cases) {
      for (const limit of [1, 4, 30]) {
        const seen: string[] = [];
        let startingAfter: string | undefined;
        for (let pages = 0; pages < 100; pages++) {
          const page = await listEmails(sql, project, { limit, startingAfter, ...filter });
          seen.push(...page.rows.map((r) => r.id));
          assert.ok(page.rows.length <= limit);
          if (!page.hasMore) break;
          assert.equal(page.rows.length, limit, `${project} ${name}: a page with more after it is full`);
          startingAfter = page.rows.at(-1)!.id;
        }
        assert.deepEqual(seen, want.map((r) => r.id), `${project} ${name}, pages of ${limit}`);
      }
    }
  }
  await sql.end();
});

// Through a pool that keeps generic plans (AppDeps.historySql), each window's statement is planned
// once per connection and its plan kept: never planned again for the values of a call (that
// planned every partition of the window each time, for the first five calls on each connection).
// Windows a project wrote little in are read as one statement; a busy project's stay apart.
test('a list page plans each window statement once per connection; a quiet project reads one window, a busy one seven, a new one two', async () => {
  const { url, sql: setup } = await createTestDatabase();
  await ensurePartitions(setup, { from: new Date(Date.now() - 100 * DAY) });
  await setup`insert into projects (id, name) values ('proj_p', 'plans'), ('proj_busy', 'busy'), ('proj_new', 'new')`;
  // 3,000 events a day for 100 days: every window holds more than a quiet one.
  await setup`
    insert into project_daily_counts (project_id, day, metric, shard, n)
    select 'proj_busy', (now() at time zone 'UTC')::date - d, 'email.sent', 0, 3000 from generate_series(0, 100) d`;
  // A project whose mail is all of today: its newest window likely fills a page alone.
  await setup`insert into project_daily_counts (project_id, day, metric, shard, n) values ('proj_new', (now() at time zone 'UTC')::date, 'email.sent', 0, 300)`;
  await setup.end();
  const sql = createSql(url, { max: 1, genericPlans: true });
  const statements = async () => sql<{ statement: string; genericPlans: number; customPlans: number }[]>`
    select statement, generic_plans::int, custom_plans::int from pg_prepared_statements
    where statement like '%limit 26%' and statement not like '%pg_prepared_statements%'`;
  for (let i = 0; i < 3; i++) {
    // A tag and a status on no email: every window is read. An address on no email reads no
    // window at all: its days (none) come from recipient_days.
    assert.deepEqual((await listEmails(sql, 'proj_p', { limit: 20, to: 'nobody@x.test' })).rows, []);
    await listEmails(sql, 'proj_p', { limit: 20, tag: { name: 'k', value: 'none' } });
    await listEmails(sql, 'proj_p', { limit: 20, status: 'failed' });
  }
  let plans = await statements();
  assert.equal(plans.length, 2, 'one statement for each of the two filters: the quiet project\'s windows are one');
  for (const p of plans) {
    assert.equal(p.customPlans, 0, p.statement);
    assert.equal(p.genericPlans, 3, p.statement);
  }
  await sql`deallocate all`;
  for (let i = 0; i < 3; i++) await listEmails(sql, 'proj_busy', { limit: 20, status: 'failed' });
  plans = await statements();
  assert.equal(plans.length, 7, 'the busy project reads each of the seven windows apart');
  for (const p of plans) assert.deepEqual([p.customPlans, p.genericPlans], [0, 3], p.statement);
  await sql`deallocate all`;
  for (let i = 0; i < 3; i++) await listEmails(sql, 'proj_new', { limit: 20, status: 'failed' });
  plans = await statements();
  assert.equal(plans.length, 2, 'the newest window alone, then the quiet older ones as one');
  await sql.end();
});
