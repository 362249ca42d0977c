--! Previous: sha1:17784bba84b9cc94e02214b369fc877baf02f5ec
--! Hash: sha1:e20bbd26384f309bcdfed32340a316367a549c52
--! Message: Time partitions: emails, events, webhook deliveries and tag entries one partition per UTC day by email id; relay Message-ID dedupe in its own table

-- Time partitions (CONTRACT §17.1): emails, events, webhook_deliveries and email_tags are split by
-- email id into one partition per UTC day, so retention drops a day's (or a month's) history as
-- whole tables instead of deleting rows. Ids are `prefix` + ULID, whose first ten characters are
-- the milliseconds of creation: a day is the id range [floor of its midnight, floor of the next).
-- events, webhook_deliveries and email_tags are split by their email_id, so everything about an
-- email lives in the partition of that email's day, whatever day an event came.
--
-- Moving an existing database copies every row into the new tables under an exclusive lock (stop
-- the service meanwhile): measured at about 100 s per million emails, each with two events, two
-- webhook deliveries and a tag entry, on two shared cores (docs/operations.md). Re-runnable: it
-- does nothing once `emails` is partitioned.

-- The smallest id of `prefix` made at or after `at` (also used by the ops views).
create or replace function mailroom_id_floor(prefix text, at timestamptz) returns text
language sql immutable parallel safe as $$
  select prefix || string_agg(
    substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (((floor(extract(epoch from at) * 1000)::bigint) >> (5 * i)) & 31)::int + 1, 1),
    '' order by i desc) || '0000000000000000'
  from generate_series(0, 9) as i
$$;

-- Creates the missing daily partitions (`<table>_pYYYYMMDD`) of the four tables for the UTC days
-- from `first_day` to `last_day`, and returns how many it created. A day that lies in an existing
-- partition (the `_before` partition of a migrated database) gets none of its four partitions.
create or replace function mailroom_ensure_partitions(first_day date, last_day date) returns int
language plpgsql as $$
declare
  d date;
  parent text;
  part text;
  made int;
  created int := 0;
begin
  for d in select generate_series(first_day, last_day, interval '1 day')::date loop
    made := 0;
    begin
      foreach parent in array array['emails', 'events', 'webhook_deliveries', 'email_tags'] loop
        part := parent || '_p' || to_char(d, 'YYYYMMDD');
        continue when to_regclass(quote_ident(part)) is not null;
        execute format('create table %I partition of %I for values from (%L) to (%L)', part, parent,
          mailroom_id_floor('email_', d::timestamp at time zone 'UTC'),
          mailroom_id_floor('email_', (d + 1)::timestamp at time zone 'UTC'));
        made := made + 1;
      end loop;
      created := created + made;
    exception when invalid_object_definition then
      -- The day overlaps the `_before` partition a migrated database may have: its rows go there.
      raise notice 'partitions of % skipped: the day lies in an existing partition', d;
    end;
  end loop;
  return created;
end
$$;

-- The relay's 24 h Message-ID dedupe needs a unique key, which a partitioned emails table can only
-- have with the id in it: the Message-IDs submitted in the last 24 hours, pruned by retention.
create table if not exists submitted_message_ids (
  project_id text not null references projects(id) on delete cascade,
  message_id text not null,
  email_id text not null,
  created_at timestamptz not null default now(),
  primary key (project_id, message_id)
);
create index if not exists submitted_message_ids_created_idx on submitted_message_ids (created_at);

do $$
declare
  first_day date;
  parent text;
begin
  if (select relkind from pg_class where oid = 'emails'::regclass) = 'p' then return; end if;
  lock table emails, events, webhook_deliveries, email_tags, idempotency_keys in access exclusive mode;

  insert into submitted_message_ids (project_id, message_id, email_id, created_at)
  select project_id, submitted_message_id, id, created_at from emails
  where submitted_message_id is not null and created_at > now() - interval '24 hours'
  on conflict do nothing;

  -- Foreign keys between the partitioned tables go: retention removes an email's events,
  -- deliveries, tag entries and idempotency keys with it, a day at a time.
  alter table idempotency_keys drop constraint if exists idempotency_keys_email_id_fkey;
  alter table emails rename to emails_unpartitioned;
  alter table events rename to events_unpartitioned;
  alter table webhook_deliveries rename to webhook_deliveries_unpartitioned;
  alter table email_tags rename to email_tags_unpartitioned;

  create table emails (like emails_unpartitioned including defaults including constraints) partition by range (id);
  create table events (like events_unpartitioned including defaults) partition by range (email_id);
  alter table events add constraint events_type_check check (type = any (array['email.sent', 'email.delivered',
    'email.delivery_delayed', 'email.bounced', 'email.complained', 'email.failed', 'email.opened', 'email.clicked']));
  create table webhook_deliveries (like webhook_deliveries_unpartitioned including defaults including constraints,
    email_id text not null) partition by range (email_id);
  create table email_tags (like email_tags_unpartitioned including defaults) partition by range (email_id);

  -- No DEFAULT partition: with one, PostgreSQL can no longer read the partitions in id order
  -- (a list page would merge every partition's index instead of stopping at the newest). Rows
  -- whose ids lie below the oldest day (made by hand, not by the service) get a `_before`
  -- partition of their own, which retention empties row by row.
  first_day := least((select min(created_at) from emails_unpartitioned), now()) at time zone 'UTC';
  if exists (select 1 from emails_unpartitioned where id < mailroom_id_floor('email_', first_day::timestamp at time zone 'UTC')) then
    foreach parent in array array['emails', 'events', 'webhook_deliveries', 'email_tags'] loop
      execute format('create table %I partition of %I for values from (minvalue) to (%L)', parent || '_before', parent,
        mailroom_id_floor('email_', first_day::timestamp at time zone 'UTC'));
    end loop;
  end if;
  perform mailroom_ensure_partitions(first_day, ((now() at time zone 'UTC')::date + 7));

  insert into emails select * from emails_unpartitioned;
  insert into events select * from events_unpartitioned;
  insert into webhook_deliveries select d.*, e.email_id
    from webhook_deliveries_unpartitioned d join events_unpartitioned e on e.id = d.event_id;
  -- Entries of emails that are gone (email_tags had no foreign key) are not carried over.
  insert into email_tags select * from email_tags_unpartitioned t
    where exists (select 1 from emails_unpartitioned e where e.id = t.email_id and e.project_id = t.project_id);
  -- cascade: the ops views over them go too, and are made again over the new tables after migrating.
  drop table webhook_deliveries_unpartitioned, events_unpartitioned, email_tags_unpartitioned, emails_unpartitioned cascade;

  -- A unique index on a partitioned table must hold the partition key: where it did not, it is
  -- widened by email_id (one SES event, one delivery, is about one email, so nothing changes), or
  -- no longer unique (SES message ids are unique by themselves; lookups only need the index).
  alter table emails add primary key (id);
  create index emails_body_kept_idx on emails (created_at) where not body_purged;
  create index emails_created_idx on emails (created_at);
  create index emails_project_idx on emails (project_id, id desc);
  create index emails_project_sent_at_idx on emails (project_id, sent_at) where sent_at is not null;
  create index emails_project_status_idx on emails (project_id, status, id desc);
  create index emails_provider_message_id_idx on emails (provider_message_id) where provider_message_id is not null;
  alter table emails add foreign key (project_id) references projects(id) on delete cascade;

  alter table events add primary key (id, email_id);
  create unique index events_dedupe_idx on events (project_id, dedupe_key, email_id) where dedupe_key is not null;
  create index events_email_id_idx on events (email_id, project_id, id);
  alter table events add foreign key (project_id) references projects(id) on delete cascade;

  alter table webhook_deliveries add primary key (id, email_id);
  create index webhook_deliveries_endpoint_idx on webhook_deliveries (project_id, endpoint_id, id desc);
  create index webhook_deliveries_event_idx on webhook_deliveries (email_id, event_id);
  create unique index webhook_deliveries_first_idx on webhook_deliveries (endpoint_id, event_id, email_id) where redelivery_of is null;
  create index webhook_deliveries_pending_idx on webhook_deliveries (next_attempt_at) where status = 'pending';
  create index webhook_deliveries_redelivery_idx on webhook_deliveries (redelivery_of) where redelivery_of is not null;
  create index webhook_deliveries_unattempted_idx on webhook_deliveries (endpoint_id, id) where status = 'pending' and attempt_count = 0;
  alter table webhook_deliveries add foreign key (project_id) references projects(id) on delete cascade;
  alter table webhook_deliveries add foreign key (endpoint_id) references webhook_endpoints(id) on delete cascade;

  alter table email_tags add primary key (project_id, name, value, email_id);
  alter table email_tags add foreign key (project_id) references projects(id) on delete cascade;

  analyze emails, events, webhook_deliveries, email_tags;
end
$$;

-- The flush's claim, as before, with each delivery's own email_id: its event is read through a
-- lateral lookup per delivery (the limit keeps it one; a join would be planned as a hash of whole
-- partitions on tables without statistics), so only that email's events partition is searched
-- (run-time pruning), by key.
create or replace function webhook_flush_claim(endpoint text, project text, lease_seconds int, how_many int)
returns table (
  id text, project_id text, endpoint_id text, status text, attempt_count int,
  url text, endpoint_status text, secret_encrypted bytea,
  event_id text, type text, email_id text, data jsonb, event_created_at timestamptz)
language plpgsql as $$
begin
  -- The update finds its rows through = any(array(...)), which only the primary key can serve.
  return query execute '
    with picked as materialized (
      select id, email_id from webhook_deliveries
      where endpoint_id = $1 and project_id = $2 and status = ''pending'' and attempt_count = 0
        and (leased_until is null or leased_until <= now())
      order by endpoint_id, id limit $4
      for update skip locked),
    claimed as (
      update webhook_deliveries set leased_until = now() + make_interval(secs => $3)
      where id = any(array(select id from picked)) and email_id = any(array(select email_id from picked))
      returning id, project_id, endpoint_id, status, attempt_count, event_id, email_id)
    select c.id, c.project_id, c.endpoint_id, c.status, c.attempt_count,
           w.url, w.status, w.secret_encrypted,
           e.id, e.type, c.email_id, e.data, e.created_at
    from claimed c
    left join webhook_endpoints w on w.id = c.endpoint_id and w.project_id = c.project_id
    left join lateral (
      select e.id, e.type, e.data, e.created_at from events e
      where e.id = c.event_id and e.email_id = c.email_id and e.project_id = c.project_id
      limit 1) e on true
    order by c.id'
  using endpoint, project, lease_seconds, how_many;
end
$$;
