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
-- emails as at ten thousand, and with 98 days kept as with 30; within its window every number is
-- exact. What is in flight (an unsent email, a pending delivery) has no age: it is read from the
-- partitions mailroom_inflight_from names (those the worker's minutely sweep found holding it, and
-- the last hours'), never from every day kept. Each of these views is a PL/pgSQL function whose
-- statement names those partitions and its time bounds as literals, so PostgreSQL plans only them.

-- Window: per project and status, the emails created in the last hour that have finished (sent,
-- failed, canceled), and every email still scheduled, queued or sending whatever its age, so a
-- backlog never hides. sent_last_5m and sent_last_60m count by sent_at, on the project's `sent` row
-- (present, with emails 0, when only older emails were sent in the hour), read per project from
-- its range of the (project_id, sent_at) index: the hour's sends, not every email made in the
-- hours the in-flight read spans.
--
-- The hour is also read as an id range (ids begin with their creation time, and the day partitions
-- are id ranges) starting an hour early: an id is made by the process's clock, created_at by the
-- database's.
-- Its 24-hour window's former helper.
drop function if exists ops.emails_finished_24h();
create or replace function ops.email_pipeline_rows() returns table (project_id text, status text, emails bigint, oldest_queued_age interval, sent_last_5m bigint, sent_last_60m bigint)
language plpgsql stable as $fn$
begin
  return query execute format($q$
    with finished as (
      select e.project_id, e.status, count(*) as emails from emails e
      where e.id >= %L and e.created_at > now() - interval '1 hour' and e.status not in ('scheduled', 'queued', 'sending')
      group by e.project_id, e.status),
    unfinished as (
      select e.project_id, e.status, count(*) as emails, min(e.created_at) as oldest_created_at
      from %s e where e.status in ('scheduled', 'queued', 'sending')
      group by e.project_id, e.status),
    recently_sent as (
      select p.id as project_id, 'sent'::text as status, s.sent_last_5m, s.sent_last_60m
      from projects p cross join lateral (
        select count(*) filter (where e.sent_at > now() - interval '5 minutes') as sent_last_5m, count(*) as sent_last_60m
        from %s e where e.project_id = p.id and e.sent_at > now() - interval '60 minutes') s
      where s.sent_last_60m > 0)
    select coalesce(f.project_id, r.project_id), coalesce(f.status, r.status), coalesce(f.emails, 0),
           null::interval, coalesce(r.sent_last_5m, 0), coalesce(r.sent_last_60m, 0)
    from finished f full join recently_sent r on r.project_id = f.project_id and r.status = f.status
    union all
    select u.project_id, u.status, u.emails,
           case when u.status = 'queued' then now() - u.oldest_created_at end,
           0::bigint, 0::bigint
    from unfinished u$q$,
    mailroom_id_floor('email_', now() - interval '2 hours'),
    mailroom_inflight_from('emails', 'project_id, status, created_at', interval '0'),
    mailroom_inflight_from('emails', 'project_id, sent_at', interval '60 minutes'));
exception when undefined_table then
  -- A day named was removed since it was listed: nothing of it was in flight. Read again.
  return query select * from ops.email_pipeline_rows();
end
$fn$;
create or replace view ops.email_pipeline as select * from ops.email_pipeline_rows();

-- Window: deliveries settled (delivered or failed) in the current hour and the 23 before it, from
-- each endpoint's hourly counters, for the success rate; the endpoint's last error if it came in
-- the last 24 hours (a failed or retried attempt); pending deliveries whatever their age, read from
-- the partitions that may hold them (mailroom_inflight_from).
create or replace function ops.webhook_health_rows() returns table (project_id text, endpoint_id text, url text, status text, consecutive_failures integer, pending_deliveries bigint, success_rate_24h_pct numeric, last_error text)
language plpgsql stable as $fn$
begin
  return query execute format($q$
    with recent as (
      select c.endpoint_id,
             sum(c.n) filter (where c.metric = 'delivered') as delivered,
             sum(c.n) as settled
      from webhook_endpoint_counts c
      where c.hour >= date_trunc('hour', now()) - interval '23 hours'
      group by c.endpoint_id),
    pending as (
      select d.endpoint_id, count(*) as n from %s d where d.status = 'pending' group by d.endpoint_id)
    select e.project_id,
           e.id,
           e.url,
           e.status,
           e.consecutive_failures,
           coalesce(p.n, 0),
           round(100.0 * coalesce(r.delivered, 0) / nullif(r.settled, 0), 1),
           case when e.last_error_at > now() - interval '24 hours' then e.last_error end
    from webhook_endpoints e
    left join recent r on r.endpoint_id = e.id
    left join pending p on p.endpoint_id = e.id$q$,
    mailroom_inflight_from('webhook_deliveries', 'endpoint_id, status', interval '0'));
exception when undefined_table then
  return query select * from ops.webhook_health_rows();
end
$fn$;
create or replace view ops.webhook_health as select * from ops.webhook_health_rows();

-- Window: what is in flight now (emails sending, deliveries pending), never history.
-- A row is listed once it has been in flight for 5 minutes, so it was there for the worker's
-- sweep of the last 4 minutes (mailroom_sweep_inflight): only the partitions sweeps found holding
-- work in flight in the last hour are read, whatever the days kept. Without a recent sweep (no
-- worker running), every partition is.
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
