import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeTime } from 'ulid';
import { createTestDatabase } from '../helpers/db.ts';
import { createSql } from '../../src/platform/db.ts';
import { claimEmail, insertQueuedEmails, markSent } from '../../src/emails/queries.ts';
import { ensurePartitions } from '../../src/retention/partitions.ts';
import { newId } from '../../src/platform/ids.ts';

const DAY = 86_400_000;
const lease = { owner: 'pool-d/a', seconds: 45, deadAfterSeconds: 30 };
const utcDay = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');

const email = (id: string, projectId: string) => ({
  id, projectId, from: 'a@x.test', to: ['b@x.test'], cc: [], bcc: [], replyTo: [],
  subject: 's', text: 't', html: null, headers: {}, attachments: [],
});

async function queuedAt(sql: ReturnType<typeof createSql>, projectId: string, ms: number) {
  const id = `email_${encodeTime(ms, 10)}${'0123456789ABCDEF'.repeat(1)}`;
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, created_at)
    values (${id}, ${projectId}, 'queued', 'a@x.test', ${['b@x.test']}, 's', 't', ${new Date(ms)})`;
  return id;
}

// With 98 days kept, a statement on the parent is planned over every day before it prunes to
// one; naming the day's partition lets PostgreSQL keep one plan per connection (§18.16).
test('claims and sends name the email\'s day partition, and each connection keeps one plan for them', async () => {
  const { url, sql: setup } = await createTestDatabase();
  await ensurePartitions(setup, { from: new Date(Date.now() - 30 * DAY) });
  await setup`insert into projects (id, name) values ('proj_d', 'days')`;
  const ids = Array.from({ length: 10 }, () => newId('email'));
  await setup.begin((tx) => insertQueuedEmails(tx, ids.map((id) => email(id, 'proj_d'))));
  await setup.end();

  const sql = createSql(url, { max: 1 });
  for (const id of ids) {
    const claimed = await claimEmail(sql, 'proj_d', id, lease);
    assert.ok(claimed, id);
    assert.equal(claimed.table, `emails_p${utcDay(Date.now())}`);
    assert.equal(await markSent(sql, claimed, `ses-${id}`, false, [{ type: 'email.sent', data: { to: ['b@x.test'] } }]), true);
  }
  const [sent] = await sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = 'proj_d' and status = 'sent'`;
  assert.equal(sent.n, ids.length);

  const plans = await sql<{ statement: string; genericPlans: number }[]>`
    select statement, generic_plans::int from pg_prepared_statements
    where statement ~ 'update "emails_p[0-9]{8}" emails set status = ''(sending|sent)'''`;
  assert.equal(plans.length, 2, 'the claim and the sent record, each prepared once');
  // PostgreSQL plans the first five calls for their values, then keeps the generic plan.
  for (const p of plans) assert.equal(p.genericPlans, ids.length - 5, p.statement.slice(0, 80));
  await sql.end();
});

test('an email in a partition that is not exactly its day, or in one removed since, is claimed through the parent', async () => {
  const { url, sql: setup } = await createTestDatabase();
  await setup`insert into projects (id, name) values ('proj_o', 'odd')`;
  // A month-long partition named like the month's first day, as an upgrade might leave.
  const monthStart = Date.UTC(2020, 0, 1);
  for (const table of ['emails', 'events', 'webhook_deliveries', 'email_tags', 'email_recipients']) {
    await setup.unsafe(`create table ${table}_p20200101 partition of ${table}
      for values from ('email_${encodeTime(monthStart, 10)}') to ('email_${encodeTime(Date.UTC(2020, 1, 1), 10)}')`);
  }
  const old = Date.now() - 40 * DAY;
  await ensurePartitions(setup, { from: new Date(old) });
  await setup.end();
  const sql = createSql(url, { max: 1 });
  for (const ms of [monthStart + 3_600_000, monthStart + 14 * DAY]) {
    const id = await queuedAt(sql, 'proj_o', ms);
    const claimed = await claimEmail(sql, 'proj_o', id, lease);
    assert.equal(claimed?.table, 'emails', new Date(ms).toISOString());
  }

  // A day's partition the process has named, then removed by retention.
  const first = await queuedAt(sql, 'proj_o', old);
  assert.equal((await claimEmail(sql, 'proj_o', first, lease))?.table, `emails_p${utcDay(old)}`);
  const second = await queuedAt(sql, 'proj_o', old + 1);
  for (const table of ['emails', 'events', 'webhook_deliveries', 'email_tags', 'email_recipients']) {
    await sql.unsafe(`drop table ${table}_p${utcDay(old)}`);
  }
  assert.equal(await claimEmail(sql, 'proj_o', second, lease), undefined);
  await sql.end();
});
