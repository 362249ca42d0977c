--! Previous: sha1:7b7cf6bb6144a203ed0cf4a2f47df154b2da03f8
--! Hash: sha1:563180d16b25fd35b5276a0a07eeafa4125b7c65
--! Message: Broadcasts: counts as counters kept by the page writer and a trigger on a broadcast's emails

-- A broadcast's counts as counters, so reading them costs the same at a hundred recipients and at
-- a million: the progress bar polls them while it sends, and the grouped read over the
-- broadcast's emails took about 3 s at a million.
--
-- queued (scheduled, queued or sending), sent and failed count the broadcast's emails by status;
-- delivered, opened and clicked, those whose delivered_at, opened_at or clicked_at is set;
-- too_large, the recipients whose personalised copy was over the message limit (no email made).
-- The page writer adds a page's new emails to queued and its too_large in the statement after its
-- insert; a trigger on emails adds each later change, for a broadcast's emails only (its WHEN
-- leaves every other update, and a claim that keeps an email queued, without a call). Each
-- database connection adds to its own row (shard = its backend pid), as the other counters do.
-- `stats rebuild` recomputes them from the emails and recipients.
create table if not exists broadcast_counts (
  broadcast_id text not null references broadcasts(id) on delete cascade,
  project_id text not null,
  metric text not null check (metric in ('queued', 'sent', 'failed', 'delivered', 'opened', 'clicked', 'too_large')),
  shard integer not null default 0,
  n bigint not null,
  primary key (broadcast_id, metric, shard)
);

create or replace function mailroom_count_broadcast_email() returns trigger
language plpgsql as $$
begin
  insert into broadcast_counts as c (broadcast_id, project_id, metric, shard, n)
  select new.broadcast_id, new.project_id, d.metric, pg_backend_pid(), d.n
  from (values
    ('queued', (new.status in ('scheduled', 'queued', 'sending'))::int - (old.status in ('scheduled', 'queued', 'sending'))::int),
    ('sent', (new.status = 'sent')::int - (old.status = 'sent')::int),
    ('failed', (new.status = 'failed')::int - (old.status = 'failed')::int),
    ('delivered', (new.delivered_at is not null)::int - (old.delivered_at is not null)::int),
    ('opened', (new.opened_at is not null)::int - (old.opened_at is not null)::int),
    ('clicked', (new.clicked_at is not null)::int - (old.clicked_at is not null)::int)) d(metric, n)
  where d.n <> 0
  order by d.metric
  on conflict (broadcast_id, metric, shard) do update set n = c.n + excluded.n;
  return null;
end
$$;

drop trigger if exists emails_broadcast_counts on emails;
create trigger emails_broadcast_counts after update on emails for each row
  when (new.broadcast_id is not null and (
    (old.status in ('scheduled', 'queued', 'sending')) <> (new.status in ('scheduled', 'queued', 'sending'))
    or (old.status = 'sent') <> (new.status = 'sent')
    or (old.status = 'failed') <> (new.status = 'failed')
    or (old.delivered_at is null) <> (new.delivered_at is null)
    or (old.opened_at is null) <> (new.opened_at is null)
    or (old.clicked_at is null) <> (new.clicked_at is null)))
  execute function mailroom_count_broadcast_email();

-- The broadcasts there are (their counts not kept yet), counted once. The trigger's creation
-- waited for every write to emails in progress, and holds off new ones until the commit. Each
-- broadcast's emails are read from the days since it began (its id bounds written into the
-- statement), so only those partitions are planned and locked, not every day kept.
do $$
declare
  b record;
begin
  for b in select id, project_id, coalesce(snapshot_at, created_at) as began from broadcasts where counts_kept is null loop
    execute format($q$
      insert into broadcast_counts (broadcast_id, project_id, metric, shard, n)
      select e.broadcast_id, e.project_id, m.metric, 0, count(*)
      from emails e
      cross join lateral (values
        ('queued', e.status in ('scheduled', 'queued', 'sending')),
        ('sent', e.status = 'sent'),
        ('failed', e.status = 'failed'),
        ('delivered', e.delivered_at is not null),
        ('opened', e.opened_at is not null),
        ('clicked', e.clicked_at is not null)) m(metric, counted)
      where e.id >= %L and e.broadcast_id = %L and e.project_id = %L and m.counted
      group by 1, 2, 3$q$,
      mailroom_id_floor('email_', b.began - interval '1 minute'), b.id, b.project_id);
    insert into broadcast_counts (broadcast_id, project_id, metric, shard, n)
    select r.broadcast_id, r.project_id, 'too_large', 0, count(*)
    from broadcast_recipients r
    where r.broadcast_id = b.id and r.project_id = b.project_id and r.skipped = 'too_large'
    group by 1, 2;
  end loop;
end
$$;
