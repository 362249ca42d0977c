--! Previous: sha1:b420b7b5e8f1b6e146725715860aa5dd2c7db29a
--! Hash: sha1:c954f6ec71a63e23e436aed9a3398484e4739552
--! Message: broadcast retention, outcome indexes, in-flight partitions, webhook health counters, recipient days

-- Enter migration here

-- Broadcast retention and outcome reads (CONTRACT §23.3, §18 retention).
-- A finished broadcast's counts, kept on its row once retention is about to remove its emails;
-- null while they are read live from its emails and recipients.
alter table broadcasts add column if not exists counts_kept jsonb;
-- The two outcomes a broadcast's recipients list asks the events for, so few bounces in a large
-- broadcast are found by this index instead of by walking every recipient.
create index if not exists events_bounced_complained on events (project_id, type, email_id)
  where type in ('email.bounced', 'email.complained');
-- Unsubscribed contacts, so the `unsubscribed` recipients walk only them.
create index if not exists contacts_unsubscribed on contacts (project_id, id) where unsubscribed;

-- ---------------------------------------------------------------------------------------------
-- Reads in flight and webhook health at scale (CONTRACT §17.2, §18.16): what is in flight is read
-- from the partitions a sweep found holding it and the last hours' partitions, and each
-- endpoint's outcomes of the last 24 hours from hourly counters, so neither the days kept nor the
-- traffic of a day changes what ops.email_pipeline, ops.webhook_health or the overview read.

-- When each partition was last found holding work in flight: a partition is kept for 65 minutes
-- after, so a read of what was sent in the last hour also knows where to look.
alter table inflight_partitions add column if not exists found_at timestamptz not null default now();
-- Since when a sweep has run at least every 4 minutes; before that the list may have missed a partition.
alter table inflight_sweep add column if not exists continuous_since timestamptz;

-- Records the partitions of emails holding an unsent email (scheduled, queued or sending) and of
-- webhook_deliveries holding a pending delivery. Each partition is asked once, through the small
-- partial index of its unsent emails or pending deliveries, whatever its backlog.
create or replace function mailroom_sweep_inflight() returns int
language plpgsql as $$
declare
  part record;
  holds boolean;
  found int := 0;
begin
  for part in
    select i.inhrelid::regclass as rel, i.inhparent = 'emails'::regclass as is_email
    from pg_inherits i
    where i.inhparent in ('emails'::regclass, 'webhook_deliveries'::regclass) and not i.inhdetachpending
  loop
    begin
      execute format(case when part.is_email
        then 'select exists (select 1 from %s where status in (''scheduled'', ''queued'', ''sending''))'
        else 'select exists (select 1 from %s where status = ''pending'')' end, part.rel) into holds;
    exception when undefined_table then
      holds := false; -- removed meanwhile
    end;
    if holds then
      insert into inflight_partitions (partition, found_at) values (part.rel::text, now())
      on conflict (partition) do update set found_at = excluded.found_at;
      found := found + 1;
    end if;
  end loop;
  delete from inflight_partitions where found_at < now() - interval '65 minutes';
  insert into inflight_sweep (swept_at, continuous_since) values (now(), now())
  on conflict (only_row) do update set
    continuous_since = case when inflight_sweep.swept_at > now() - interval '4 minutes'
                            then coalesce(inflight_sweep.continuous_since, now()) else now() end,
    swept_at = excluded.swept_at;
  return found;
end
$$;

-- The relations that hold every row of `parent` (emails or webhook_deliveries) that is in flight
-- now, or was at any moment of the last `back`, as a FROM item of `columns`: the partitions of ids
-- from 4 hours ago on (an email made since the last sweep; clocks may differ by an hour), and the
-- older partitions a sweep found holding such rows within `back` and 5 minutes. A delivery made
-- for an older email after the last sweep marks its partition itself (markInflight, in the
-- statement that makes it).
-- Without sweeps every 4 minutes over that span (no worker running), the parent: every partition.
create or replace function mailroom_inflight_from(parent regclass, columns text, back interval) returns text
language plpgsql stable as $$
declare
  sweep record;
  key text := case when parent = 'emails'::regclass then 'id' else 'email_id' end;
  recent text := mailroom_id_floor('email_', now() - interval '4 hours');
  parts text;
begin
  select swept_at, continuous_since into sweep from inflight_sweep;
  if sweep.swept_at is null or sweep.swept_at <= now() - interval '4 minutes'
     or (back > interval '0' and (sweep.continuous_since is null or sweep.continuous_since > now() - back - interval '5 minutes')) then
    return format('(select %s from %s)', columns, parent);
  end if;
  select string_agg(format('select %s from %s where %I < %L', columns, i.inhrelid::regclass, key, recent), ' union all ')
    into parts
  from inflight_partitions f
  join pg_inherits i on i.inhrelid = to_regclass(f.partition)
  where i.inhparent = parent and f.found_at > now() - back - interval '5 minutes';
  return format('(select %s from %s where %I >= %L%s)', columns, parent, key, recent, coalesce(' union all ' || parts, ''));
end
$$;

-- Each endpoint's settled deliveries by hour (delivered or failed), kept by the statement that
-- settles them and sharded by connection as project_daily_counts is; the last error on the
-- endpoint itself. ops.webhook_health reads the last 24 hours of them. Rebuilt by `stats rebuild`
-- from the deliveries' last attempts; retention drops the hours past two days.
create table if not exists webhook_endpoint_counts (
  endpoint_id text not null,
  project_id text not null,
  hour timestamptz not null,
  metric text not null check (metric in ('delivered', 'failed')),
  shard int not null default 0,
  n bigint not null,
  primary key (endpoint_id, hour, metric, shard)
);
alter table webhook_endpoints add column if not exists last_error text;
alter table webhook_endpoints add column if not exists last_error_at timestamptz;

-- The days on which a project sent to an address (any of to, cc and bcc), so that finding an
-- email by recipient (CONTRACT §21.5) reads those days' partitions of email_recipients alone,
-- never a probe of each day kept: an address on no email costs one index lookup. Written with the
-- recipient entries, in the accept's statement (a day's first email to the address adds its row);
-- retention removes the days it removes; `stats rebuild` remakes it from email_recipients. A
-- migrated database's `_before` partition is the day '-infinity'.
create table if not exists recipient_days (
  project_id text not null,
  address text not null,
  day date not null,
  primary key (project_id, address, day)
);
create index if not exists recipient_days_day_idx on recipient_days (day);

-- The day of a day partition of emails or of a table split like it (`…_pYYYYMMDD`), from its
-- name; '-infinity' for a migrated database's `_before` partition.
create or replace function mailroom_partition_day(partition text) returns date
language sql immutable parallel safe as $$
  select coalesce(to_date(substring(partition from '_p([0-9]{8})$'), 'YYYYMMDD'), '-infinity'::date)
$$;

do $$
begin
  if not exists (select 1 from recipient_days limit 1) then
    insert into recipient_days (project_id, address, day)
    select distinct project_id, address, mailroom_partition_day(tableoid::regclass::text) from email_recipients
    on conflict do nothing;
  end if;
end
$$;

-- The project's emails scheduled, queued or sending now, by status, for the overview: read where
-- mailroom_inflight_from says they can be, through each partition's (project_id, status, id) index.
create or replace function mailroom_inflight_counts(project text) returns table (status text, emails bigint)
language plpgsql stable as $$
begin
  return query execute format(
    'select e.status, count(*) from %s e where e.project_id = $1 and e.status in (''scheduled'', ''queued'', ''sending'') group by e.status',
    mailroom_inflight_from('emails', 'project_id, status', '0')) using project;
end
$$;
-- ---------------------------------------------------------------------------------------------
