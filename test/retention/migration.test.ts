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

  for (const text of all.slice(split)) if (text.replace(/--.*$/gm, '').trim()) await sql.unsafe(text);

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
  assert.equal(days.reduce((n, d) => n + d.sent + d.delivered, 0), 60);
  const [deliveries] = await sql`select count(*)::int as n from webhook_deliveries`;
  assert.equal(deliveries!.n, 60);
});
