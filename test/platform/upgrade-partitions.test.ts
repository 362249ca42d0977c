import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Logger, migrate } from 'graphile-migrate';
import postgres from 'postgres';
import { encodeTime } from 'ulid';
import { startPrivatePostgres } from '../helpers/private-pg.ts';
import { COMMITTED_MIGRATIONS, ROOT, runCli } from '../helpers/process.ts';
import { TEST_SECRET_KEY } from '../helpers/app.ts';
import { getEmail } from '../../src/emails/queries.ts';
import { listEventsOfEmail } from '../../src/events/queries.ts';

const DAYS = 400;
const DAY = 86_400_000;

// CONTRACT §18.9: a database of the schema before the time partitions (000018), holding one email
// a day for 400 days, migrates with PostgreSQL's default settings (max_connections 100,
// max_locks_per_transaction 64: a lock table of about 6,400 for the whole server). 000022 alone
// takes about 30 locks a day of history in its one transaction.
test('a database with 400 days of history migrates past the time partitions with default lock settings', { timeout: 240_000 }, async (t) => {
  const server = await startPrivatePostgres({ maxConnections: 100 });
  const admin = postgres(server.urlFor('postgres'), { max: 1, onnotice: () => {} });
  await admin`create database upgraded`;
  await admin.end();
  const url = server.urlFor('upgraded');
  await migrateCommittedBefore(url, '000019');

  const sql = postgres(url, { max: 2, onnotice: () => {}, transform: { column: { from: postgres.toCamel } } });
  t.after(() => sql.end());
  const [settings] = await sql`select current_setting('max_locks_per_transaction') as locks, current_setting('max_connections') as conns`;
  assert.deepEqual(settings, { locks: '64', conns: '100' }, "PostgreSQL's defaults");

  await sql`insert into projects (id, name) values ('proj_old', 'old rows')`;
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted) values ('wh_old', 'proj_old', 'https://x.test', '\\x00')`;
  const now = Date.now();
  const emails = Array.from({ length: DAYS }, (_, i) => ({ id: idAt('email_', now - i * DAY), days: i }));
  for (let i = 0; i < emails.length; i += 100) {
    const chunk = emails.slice(i, i + 100);
    await sql`insert into emails ${sql(chunk.map(({ id, days }) => ({
      id, project_id: 'proj_old', status: 'sent', from_address: 'a@x.test', to_addresses: sql.array([`b${days}@x.test`]),
      subject: `day ${days}`, html: `<p>${days}</p>`, text: `day ${days}`, tags: sql.json([{ name: 'day', value: String(days % 7) }]),
      created_at: new Date(now - days * DAY),
    })))}`;
    await sql`insert into events ${sql(chunk.flatMap(({ id, days }) => ['email.sent', 'email.delivered'].map((type, k) => ({
      id: idAt('evt_', now - days * DAY + k), project_id: 'proj_old', email_id: id, type, created_at: new Date(now - days * DAY + k),
    }))))}`;
  }
  await sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_id)
    select replace(id, 'evt_', 'whd_'), project_id, 'wh_old', id from events`;
  // Rows made by hand with ids older than the oldest day: 000022 gives them a partition of their own.
  await sql`insert into emails (id, project_id, status, from_address, to_addresses, subject, text, created_at)
    select 'email_01JOLD' || lpad(i::text, 14, '0'), 'proj_old', 'sent', 'a@x.test', array['h@x.test'], 'by hand', 't', now() - interval '1 day'
    from generate_series(1, 3) i`;

  // The lock table, sampled while the real CLI migrates.
  const sampler = postgres(url, { max: 1, onnotice: () => {} });
  let peak = 0;
  let sampling = true;
  const sampled = (async () => {
    while (sampling) {
      const [row] = await sampler`select count(*)::int as n from pg_locks`;
      peak = Math.max(peak, row!.n);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  const started = performance.now();
  const run = await runCli(['migrate'], { DATABASE_URL: url, SECRET_KEY: TEST_SECRET_KEY });
  const seconds = (performance.now() - started) / 1000;
  sampling = false;
  await sampled;
  await sampler.end();
  t.diagnostic(`400-day migration: ${seconds.toFixed(1)} s, peak pg_locks ${peak}`);
  assert.equal(run.code, 0, `migrate failed: ${run.stderr}`);
  assert.equal(run.json().applied, COMMITTED_MIGRATIONS - 18);
  // The rest of the upgrade takes about four locks a day (000024 drops constraints on the parents,
  // which locks each partition): far below the server's ~6,400, whatever one day's move takes.
  assert.ok(peak < 3_000, `peak pg_locks ${peak}`);

  // Every day in a partition of its own, every row carried over and readable.
  const [kind] = await sql`select relkind::text as kind from pg_class where oid = 'emails'::regclass`;
  assert.equal(kind!.kind, 'p');
  const [parts] = await sql`select count(*)::int as n from pg_inherits where inhparent = 'emails'::regclass`;
  assert.equal(parts!.n, DAYS + 7 + 1, 'a partition a day from the oldest to a week ahead, and _before');
  const [counts] = await sql`select (select count(*)::int from emails) as emails, (select count(*)::int from events) as events,
    (select count(*)::int from webhook_deliveries) as deliveries, (select count(*)::int from email_tags) as tags`;
  assert.deepEqual(counts, { emails: DAYS + 3, events: DAYS * 2, deliveries: DAYS * 2, tags: DAYS });
  for (const { id, days } of [emails[0]!, emails[123]!, emails[DAYS - 1]!]) {
    const [row] = await sql`select tableoid::regclass::text as part from emails where id = ${id}`;
    assert.equal(row!.part, `emails_p${new Date(now - days * DAY).toISOString().slice(0, 10).replaceAll('-', '')}`);
    assert.equal((await getEmail(sql, 'proj_old', id))?.html, `<p>${days}</p>`);
    assert.deepEqual((await listEventsOfEmail(sql, 'proj_old', id)).map((e) => e.type), ['email.sent', 'email.delivered']);
  }
  const [byHand] = await sql`select tableoid::regclass::text as part from emails where id = 'email_01JOLD00000000000001'`;
  assert.equal(byHand!.part, 'emails_before');
  const [old] = await sql`select count(*)::int as n from pg_class where relname like '%unpartitioned%'`;
  assert.equal(old!.n, 0, 'the old tables and their indexes are gone');

  // The schema is the one a fresh database gets from the same migrations.
  const freshUrl = await server.createDatabase('fresh');
  const fresh = postgres(freshUrl, { max: 1, onnotice: () => {} });
  t.after(() => fresh.end());
  const upgraded = postgres(url, { max: 1, onnotice: () => {} });
  t.after(() => upgraded.end());
  assert.deepEqual(await schemaOf(upgraded), await schemaOf(fresh));
});

/** Migrates with graphile-migrate as the service did before migration `number`. */
async function migrateCommittedBefore(url: string, number: string) {
  const folder = await mkdtemp(path.join(tmpdir(), 'mailroom-old-'));
  try {
    await mkdir(path.join(folder, 'committed'));
    for (const file of await readdir(path.join(ROOT, 'migrations/committed'))) {
      if (file < number) await symlink(path.join(ROOT, 'migrations/committed', file), path.join(folder, 'committed', file));
    }
    await migrate({ connectionString: url, migrationsFolder: folder, logger: new Logger(() => () => {}) } as never);
    await new Promise((r) => setTimeout(r, 300)); // graphile-migrate's pool lingers 200 ms
  } finally {
    await rm(folder, { recursive: true, force: true });
  }
}

/**
 * Tables (partitions aside), their columns, constraints, indexes and triggers, the functions, and
 * the indexes of today's partitions with the partition's name taken out.
 */
async function schemaOf(sql: postgres.Sql) {
  const today = `_p${new Date().toISOString().slice(0, 10).replaceAll('-', '')}`;
  return sql`
    select 'column' as kind, c.relname || '.' || a.attname as name,
           format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || a.attnum as def
    from pg_class c join pg_attribute a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    left join pg_attrdef d on d.adrelid = c.oid and d.adnum = a.attnum
    where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
    union all
    select 'constraint', c.relname || '.' || k.conname, pg_get_constraintdef(k.oid)
    from pg_constraint k join pg_class c on c.oid = k.conrelid
    where c.relnamespace = 'public'::regnamespace and not c.relispartition
    union all
    select 'index', i.relname, pg_get_indexdef(i.oid)
    from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class c on c.oid = x.indrelid
    where c.relnamespace = 'public'::regnamespace and not c.relispartition
    union all
    select 'partition index', replace(i.relname, ${today}, '_pTODAY'), replace(pg_get_indexdef(i.oid), ${today}, '_pTODAY')
    from pg_index x join pg_class i on i.oid = x.indexrelid join pg_class c on c.oid = x.indrelid
    where c.relnamespace = 'public'::regnamespace and c.relname like ${`%${today}`}
    union all
    select 'trigger', c.relname || '.' || g.tgname, pg_get_triggerdef(g.oid)
    from pg_trigger g join pg_class c on c.oid = g.tgrelid
    where c.relnamespace = 'public'::regnamespace and not c.relispartition and not g.tgisinternal
    union all
    select 'function', p.proname, md5(p.prosrc)
    from pg_proc p where p.pronamespace = 'public'::regnamespace
    order by 1, 2, 3`;
}

/** An id of `prefix` made at `ms`, as newId would have spelled it then. */
function idAt(prefix: string, ms: number) {
  return prefix + encodeTime(ms, 10) + randomBytes(16).toString('hex').toUpperCase().replace(/[ILOU]/g, '0').slice(0, 16);
}
