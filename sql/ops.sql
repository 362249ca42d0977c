-- Operator views. Re-applied after every migration run, so they always match the schema.
create schema if not exists ops;

-- mailroom_id_floor(prefix, at), the smallest id of `prefix` made at or after `at`, comes from
-- the migrations (the day partitions' bounds are made with it), which always run before this file.

create or replace view ops.queue as
select task_identifier as task,
       case when locked_at is not null then 'running'
            when attempts >= max_attempts then 'dead'
            when run_at > now() then 'scheduled'
            else 'ready' end as state,
       count(*) as jobs,
       now() - min(coalesce(locked_at, run_at)) as oldest_age
from graphile_worker.jobs
group by 1, 2;

-- Every view reads a bounded recent window (stated on each), so it costs the same at a million
-- emails as at ten thousand; within its window every number is exact.
--
-- The views that must read every day partition (a backlog has no age) are each a PL/pgSQL
-- function's one query: PL/pgSQL keeps a query's plan for the session, so a connection plans it
-- over the partitions once, not on every call, and its time bounds (now() - …) prune partitions
-- as it starts.

-- Window: per project and status, the emails created in the last 24 hours that have finished
-- (sent, failed, canceled), and every email still scheduled, queued or sending whatever its age,
-- so a backlog never hides. sent_last_5m and sent_last_60m count by sent_at, on the sent row.
--
-- The 24 hours are also read as an id range (ids begin with their creation time, and the day
-- partitions are id ranges), written into the statement as a literal so that PostgreSQL plans
-- and reads only the last two days' partitions instead of every day kept. The range starts an
-- hour early: an id is made by the process's clock, created_at by the database's.
create or replace function ops.emails_finished_24h() returns table (project_id text, status text, emails bigint)
language plpgsql stable as $$
begin
  return query execute format($q$
    select e.project_id, e.status, count(*) from emails e
    where e.id >= %L and e.created_at > now() - interval '24 hours' and e.status not in ('scheduled', 'queued', 'sending')
    group by e.project_id, e.status$q$, mailroom_id_floor('email_', now() - interval '25 hours'));
end
$$;

create or replace function ops.email_pipeline_rows() returns table (project_id text, status text, emails bigint, oldest_queued_age interval, sent_last_5m bigint, sent_last_60m bigint)
language plpgsql stable as $fn$
#variable_conflict use_column
begin
  return query
    with finished as (
      select * from ops.emails_finished_24h()),
    unfinished as (
      -- The statuses are constants, so the planner reads them from (project_id, status, id): the
      -- rows in flight, never the project's history.
      select p.id as project_id, c.status, c.emails, c.oldest_created_at
      from projects p
      cross join lateral (
        select e.status, count(*) as emails, min(e.created_at) as oldest_created_at
        from emails e
        where e.project_id = p.id and e.status in ('scheduled', 'queued', 'sending')
        group by e.status) c),
    recently_sent as (
      select p.id as project_id,
             (select count(*) from emails e where e.project_id = p.id and e.sent_at > now() - interval '5 minutes') as sent_last_5m,
             (select count(*) from emails e where e.project_id = p.id and e.sent_at > now() - interval '60 minutes') as sent_last_60m
      from projects p)
    select f.project_id, f.status, f.emails,
           null::interval as oldest_queued_age,
           case when f.status = 'sent' then r.sent_last_5m else 0 end as sent_last_5m,
           case when f.status = 'sent' then r.sent_last_60m else 0 end as sent_last_60m
    from finished f join recently_sent r using (project_id)
    union all
    select u.project_id, u.status, u.emails,
           case when u.status = 'queued' then now() - u.oldest_created_at end,
           0::bigint, 0::bigint
    from unfinished u;
end
$fn$;
create or replace view ops.email_pipeline as select * from ops.email_pipeline_rows();

-- Window: deliveries created in the last 24 hours (by id, which is time-ordered) for the success
-- rate and the last error; pending deliveries whatever their age. Deliveries are partitioned by
-- their email's id, and an event (a click, a late bounce) may come for an email of any day kept,
-- so every day's partition is read; each is read once for all endpoints and both figures, as one
-- range of its primary key (id, email_id), and its pending ones once through their partial index.
-- (Read per endpoint, through (project_id, endpoint_id, id), each partition was visited twice for
-- each endpoint: the cost grew with endpoints times days kept.)
create or replace function ops.webhook_health_rows() returns table (project_id text, endpoint_id text, url text, status text, consecutive_failures integer, pending_deliveries bigint, success_rate_24h_pct numeric, last_error text)
language plpgsql stable as $fn$
#variable_conflict use_column
begin
  return query
    with recent as (
      select d.project_id, d.endpoint_id,
             count(*) filter (where d.status = 'delivered') as delivered,
             count(*) filter (where d.status <> 'pending') as settled,
             (array_agg(d.error order by d.id desc) filter (where d.error is not null))[1] as last_error
      from webhook_deliveries d
      where d.id >= mailroom_id_floor('whd_', now() - interval '24 hours')
      group by d.project_id, d.endpoint_id),
    pending as (
      select endpoint_id, count(*) as n from webhook_deliveries where status = 'pending' group by endpoint_id)
    select e.project_id,
           e.id as endpoint_id,
           e.url,
           e.status,
           e.consecutive_failures,
           coalesce(p.n, 0) as pending_deliveries,
           round(100.0 * r.delivered / nullif(r.settled, 0), 1) as success_rate_24h_pct,
           r.last_error
    from webhook_endpoints e
    left join recent r on r.project_id = e.project_id and r.endpoint_id = e.id
    left join pending p on p.endpoint_id = e.id;
end
$fn$;
create or replace view ops.webhook_health as select * from ops.webhook_health_rows();

-- Window: what is in flight now (emails sending, deliveries pending), never history.
-- A row is listed once it has been in flight for 5 minutes, so it was there for the worker's
-- sweep of the last 4 minutes (mailroom_sweep_inflight): only the partitions that sweep found are
-- read, whatever the days kept. Without a recent sweep (no worker running), every partition is.
create or replace function ops.stuck_rows() returns table (kind text, project_id text, id text, status text, age interval)
language plpgsql stable as $fn$
#variable_conflict use_column
declare
  swept boolean := exists (select 1 from inflight_sweep where swept_at > now() - interval '4 minutes');
  part record;
begin
  for part in
    select rel, rel = 'emails'::regclass as is_email
    from unnest(array['emails'::regclass, 'webhook_deliveries'::regclass]) rel
    where not swept
    union all
    select i.inhrelid::regclass, i.inhparent = 'emails'::regclass
    from inflight_partitions f
    join pg_inherits i on i.inhrelid = to_regclass(f.partition)
    where swept and i.inhparent in ('emails'::regclass, 'webhook_deliveries'::regclass)
  loop
    begin
      if part.is_email then
        return query execute format($q$
          select 'email'::text, project_id, id, status, now() - updated_at from %s
          where status = 'sending' and updated_at < now() - interval '5 minutes'$q$, part.rel);
      else
        return query execute format($q$
          select 'webhook_delivery'::text, project_id, id, status, now() - next_attempt_at from %s
          where status = 'pending' and next_attempt_at < now() - interval '5 minutes'$q$, part.rel);
      end if;
    exception when undefined_table then
      -- Its day was removed since the sweep: nothing of it is in flight.
    end;
  end loop;
end
$fn$;
create or replace view ops.stuck as select * from ops.stuck_rows();

create or replace view ops.domains as
select project_id, id, value, region, verification_status, dkim_status, mail_from_status,
       now() - last_checked_at as last_check_age
from domains;

-- Per SES connection: the pace sends are held to, the daily quota and its use, throttles, and
-- when the next send may go. Window: sends of the last 24 hours, throttles of the last hour.
create or replace view ops.providers as
select pc.project_id,
       pc.region,
       a.max_send_rate as account_max_send_rate,
       pc.rate_cap,
       least(coalesce(a.max_send_rate, 1),
             coalesce((select min(o.rate_cap) from provider_connections o where o.ses_account_id = a.id), 'infinity'::float8))
         / (case when a.slowed_until > now() then 2 else 1 end) as send_rate,
       a.slowed_until > now() as slowed,
       a.max_24_hour_send,
       -- Recipients, as SES counts them, of every project on the account, by hour.
       (select coalesce(sum(u.recipients), 0) from ses_account_usage u
         where u.account_id = a.id and u.hour > now() - interval '24 hours')::bigint as sent_last_24h,
       (select count(*) from provider_throttles t
         where t.project_id = pc.project_id and t.throttled_at > now() - interval '1 hour') as throttles_last_hour,
       greatest(a.next_send_slot, now()) as next_send_slot,
       a.quota_checked_at,
       a.id as ses_account_id,
       (select count(*) from provider_connections o where o.ses_account_id = a.id) as projects_on_account
from provider_connections pc
join ses_accounts a on a.id = pc.ses_account_id;

-- Window: each project's reputation windows (§19.2), as GET /v1/reputation reads them through
-- the one function, mailroom_reputation(): the last hour and the representative window (at most
-- 30 days), for the project and for its SES account, from the hourly counters.
create or replace view ops.reputation as
select p.id as project_id, r.scope, r."window", r.sent, r.bounced, r.complained,
       case when r.sent > 0 then r.bounced::float8 / r.sent else 0 end as bounce_rate,
       case when r.sent > 0 then r.complained::float8 / r.sent else 0 end as complaint_rate,
       r.since,
       coalesce(pr.bounce_pause, 0.04) as bounce_pause,
       coalesce(pr.complaint_pause, 0.0008) as complaint_pause,
       pr.paused_at, pr.pause_reason
from projects p
cross join lateral mailroom_reputation(p.id) r
left join project_reputation pr on pr.project_id = p.id;
