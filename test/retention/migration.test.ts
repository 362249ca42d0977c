import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createTestDatabase } from '../helpers/db.ts';
import { ROOT } from '../helpers/process.ts';
import { assertDerivedMatchBaseRows } from '../helpers/derived.ts';
import { getEmail, listEmails } from '../../src/emails/queries.ts';
import { listEventsOfEmail } from '../../src/events/queries.ts';
import { listSuppressions } from '../../src/suppressions/queries.ts';
import { dailyActivity } from '../../src/projects/activity.ts';
import { randomBytes } from 'node:crypto';
import { encodeTime } from 'ulid';

/**
 * The schema as it stood before the data-at-scale migration (every committed migration before the
 * one that makes project_daily_counts), then that one and whatever follows (migrations/current.sql
 * included), over rows already there.
 */
const committed = readdirSync(path.join(ROOT, 'migrations/committed')).filter((f) => f.endsWith('.sql')).sort()
  .map((f) => readFileSync(path.join(ROOT, 'migrations/committed', f), 'utf8'));
const current = readFileSync(path.join(ROOT, 'migrations/current.sql'), 'utf8');
const all = [...committed, current];
const split = all.findIndex((text) => /create table if not exists project_daily_counts/.test(text));

test('the data-at-scale migration moves a database with rows in it: every old row stays readable and counted', async () => {
  assert.ok(split > 0, 'the migration is found');
  const { sql } = await createTestDatabase({ empty: true });
  for (const text of all.slice(0, split)) await sql.unsafe(text);

  await sql`insert into projects (id, name) values ('proj_old', 'old rows')`;
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, tags, created_at)
    select 'email_01JOLD' || lpad(i::text, 14, '0'), 'proj_old', 'sent', 'a@x.test', array['b' || i || '@x.test'], 'old ' || i,
           '<p>' || i || '</p>', 'text ' || i,
           case when i % 3 = 0 then '[{"name":"kind","value":"rare"}]'::jsonb else '[{"name":"kind","value":"common"}]'::jsonb end,
           now() - make_interval(days => i % 10)
    from generate_series(1, 60) i`;
  await sql`insert into events (id, project_id, email_id, type, created_at)
    select 'evt_01JOLD' || lpad(i::text, 14, '0'), 'proj_old', 'email_01JOLD' || lpad(i::text, 14, '0'),
           case when i % 2 = 0 then 'email.sent' else 'email.delivered' end, now() - make_interval(days => i % 10)
    from generate_series(1, 60) i`;
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values ('wh_old', 'proj_old', 'https://x.test', '\\x00')`;
  await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id)
    select 'whd_01JOLD' || lpad(i::text, 14, '0'), 'proj_old', 'wh_old', 'evt_01JOLD' || lpad(i::text, 14, '0') from generate_series(1, 60) i`;
  await sql`insert into suppressions (project_id, address, reason) select 'proj_old', 's' || i || '@x.test', 'manual' from generate_series(1, 5) i`;

  const apply = async (texts: string[]) => { for (const text of texts) if (text.replace(/--.*$/gm, '').trim()) await sql.unsafe(text); };
  // Up to the time partitions, then rows as the service made them (ids of their own time) and a
  // message the relay took an hour ago, then the partitions' migration over all of it.
  const partitions = all.findIndex((text) => /mailroom_ensure_partitions/.test(text));
  assert.ok(partitions >= split, 'the partitions migration is found');
  await apply(all.slice(split, partitions));
  const made = Array.from({ length: 12 }, (_, i) => ({ id: idAt('email_', Date.now() - i * 5 * 86_400_000), days: i * 5 }));
  for (const { id, days } of made) {
    await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, tags, created_at, submitted_message_id)
      values (${id}, 'proj_old', 'sent', 'a@x.test', ${['c@x.test']}, ${`made ${days}`}, 't', '[{"name":"kind","value":"made"}]',
              now() - make_interval(days => ${days}), ${days === 0 ? '<relay@x.test>' : null})`;
    await sql`insert into events (id, project_id, email_id, type, dedupe_key, created_at)
      values (${id.replace('email_', 'evt_')}, 'proj_old', ${id}, 'email.delivered', ${`ses-${id}`}, now() - make_interval(days => ${days}))`;
    await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id)
      values (${id.replace('email_', 'whd_')}, 'proj_old', 'wh_old', ${id.replace('email_', 'evt_')})`;
  }
  await sql`insert into email_tags (project_id, name, value, email_id) select 'proj_old', 'kind', 'made', id from emails where subject like 'made %'`;
  await sql`insert into project_daily_counts (project_id, day, metric, shard, n)
    select project_id, (created_at at time zone 'UTC')::date, type, 0, count(*) from events where email_id like 'email\_0%' and email_id not like 'email\_01JOLD%' group by 1, 2, 3
    on conflict (project_id, day, metric, shard) do update set n = project_daily_counts.n + excluded.n`;
  await apply(all.slice(partitions));
  await apply([current]); // again: the migration is re-runnable

  const email = await getEmail(sql, 'proj_old', 'email_01JOLD00000000000007');
  assert.equal(email?.html, '<p>7</p>');
  assert.equal(email?.bodyPurged, false);
  const rare = await listEmails(sql, 'proj_old', { limit: 100, tag: { name: 'kind', value: 'rare' } });
  assert.equal(rare.rows.length, 20);
  assert.ok(rare.rows.every((r) => r.tags[0]!.value === 'rare'));
  const page = await listEmails(sql, 'proj_old', { limit: 10, tag: { name: 'kind', value: 'common' }, startingAfter: 'email_01JOLD00000000000050' });
  assert.deepEqual(page.rows.map((r) => r.id.slice(-2)), ['49', '47', '46', '44', '43', '41', '40', '38', '37', '35']);
  assert.equal((await listEventsOfEmail(sql, 'proj_old', 'email_01JOLD00000000000007')).length, 1);
  assert.equal((await listSuppressions(sql, 'proj_old', { limit: 10 })).rows.length, 5);
  await assertDerivedMatchBaseRows(sql, 'after the migration');
  const days = await dailyActivity(sql, 'proj_old', 14);
  assert.equal(days.reduce((n, d) => n + d.sent + d.delivered, 0), 60 + made.filter((m) => m.days < 14).length);
  const [deliveries] = await sql`select count(*)::int as n from webhook_deliveries`;
  assert.equal(deliveries!.n, 60 + made.length);

  // The rows made with ids of their own time are in their days' partitions, readable as before.
  const [kind] = await sql`select relkind from pg_class where oid = 'emails'::regclass`;
  assert.equal(kind!.relkind, 'p');
  const [before] = await sql`select tableoid::regclass::text as part from emails where id = 'email_01JOLD00000000000007'`;
  assert.equal(before!.part, 'emails_before', 'ids below the oldest day have a partition of their own');
  for (const { id, days } of made) {
    const [row] = await sql`select tableoid::regclass::text as part from emails where id = ${id}`;
    assert.equal(row!.part, `emails_p${new Date(Date.now() - days * 86_400_000).toISOString().slice(0, 10).replaceAll('-', '')}`);
    assert.equal((await getEmail(sql, 'proj_old', id))?.subject, `made ${days}`);
    assert.deepEqual((await listEventsOfEmail(sql, 'proj_old', id)).map((e) => e.type), ['email.delivered']);
    const [d] = await sql`select email_id from webhook_deliveries where event_id = ${id.replace('email_', 'evt_')}`;
    assert.equal(d!.emailId, id, 'a delivery knows its email');
  }
  const made10 = await listEmails(sql, 'proj_old', { limit: 5, tag: { name: 'kind', value: 'made' } });
  assert.deepEqual(made10.rows.map((r) => r.id), made.slice(0, 5).map((m) => m.id));
  const [relay] = await sql`select email_id from submitted_message_ids where project_id = 'proj_old' and message_id = '<relay@x.test>'`;
  assert.equal(relay!.emailId, made[0]!.id, "the relay's recent Message-ID still dedupes");
  await assert.rejects(sql`insert into events (id, project_id, email_id, type, dedupe_key) values ('evt_again', 'proj_old', ${made[1]!.id}, 'email.delivered', ${`ses-${made[1]!.id}`})`,
    (err: { code?: string }) => err.code === '23505', 'the SES dedupe key still holds');
  await assertDerivedMatchBaseRows(sql, 'after the partitions');
});

/** An id of `prefix` made at `ms`, as newId would have spelled it then. */
function idAt(prefix: string, ms: number) {
  return prefix + encodeTime(ms, 10) + randomBytes(16).toString('hex').toUpperCase().replace(/[ILOU]/g, '0').slice(0, 16);
}
