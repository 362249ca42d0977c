--! Previous: sha1:00f8240f69093191f9aa24ec8ca12fd661bd5027
--! Hash: sha1:e9214a905b5fb3053a73d441990b8367f7a1f099
--! Message: Data at scale: retention indexes, body_purged, email_tags, project_daily_counts

-- Data at scale: retention, daily counters, a tag table, and indexes that keep reads flat as
-- history grows. Cost on an existing database: measured at 23 s for 200 thousand emails with
-- 400 thousand events and 200 thousand webhook deliveries (2 shared cores), so about 2 minutes
-- per million emails with their events, nearly all of it the index builds and the fills of
-- email_tags and project_daily_counts. Nothing here rewrites a table, and every old row stays
-- readable as it was. The index builds lock writes to their table while they run: on a large
-- database, create the indexes first with CREATE INDEX CONCURRENTLY under the same names.

-- An email whose bodies retention has purged. A constant default is stored in the catalog, not in
-- each row: adding it costs nothing per row.
alter table emails add column if not exists body_purged boolean not null default false;

-- Retention finds emails by age; the bodies still kept, by age, in an index that shrinks as they
-- are purged. (~1 s per million emails each.)
create index if not exists emails_created_idx on emails (created_at);
create index if not exists emails_body_kept_idx on emails (created_at) where not body_purged;

-- Removing an email removes its events through the foreign key, and PostgreSQL looks them up by
-- email_id alone: the index leads with it (and still serves the reads by project and email).
-- Likewise for the keys and redeliveries that point at removed rows. (~2 s per million events.)
create index if not exists events_email_id_idx on events (email_id, project_id, id);
drop index if exists events_email_idx;
create index if not exists idempotency_keys_email_idx on idempotency_keys (email_id);
create index if not exists webhook_deliveries_redelivery_idx on webhook_deliveries (redelivery_of) where redelivery_of is not null;
-- Only the overview chart read events by day; it reads project_daily_counts now.
drop index if exists events_project_created_idx;

-- The tag filter reads this table in page order, so a rare tag costs what a common one does: the
-- page's rows, never a scan of the project's emails. It replaces the GIN index on emails.tags.
create table if not exists email_tags (
  project_id text not null references projects(id) on delete cascade,
  name text not null,
  value text not null,
  email_id text not null,
  primary key (project_id, name, value, email_id)
);
insert into email_tags (project_id, name, value, email_id)
select e.project_id, t->>'name', t->>'value', e.id
from emails e cross join lateral jsonb_array_elements(e.tags) t
where e.tags <> '[]'::jsonb
on conflict do nothing;
drop index if exists emails_tags_idx;

-- Events per project, UTC day and type, kept by the statement that records the events. Each
-- database connection adds to its own row (shard = its backend pid), so concurrent sends never
-- wait on one another's counter; retention folds finished days into shard 0. Reads sum the shards.
-- Rebuilt from events by `stats rebuild`.
create table if not exists project_daily_counts (
  project_id text not null references projects(id) on delete cascade,
  day date not null,
  metric text not null,
  shard int not null default 0,
  n bigint not null,
  primary key (project_id, day, metric, shard)
);
-- The rows retention folds into shard 0 each run, found without reading the folded ones.
create index if not exists project_daily_counts_unfolded_idx on project_daily_counts (day) where shard <> 0;
insert into project_daily_counts (project_id, day, metric, shard, n)
select project_id, (created_at at time zone 'UTC')::date, type, 0, count(*)
from events group by 1, 2, 3
on conflict (project_id, day, metric, shard) do update set n = excluded.n;

-- The suppression list in its page order, newest first.
create index if not exists suppressions_page_idx on suppressions (project_id, created_at desc, address desc);
