--! Previous: sha1:556d8edc928996df5d9ab0bfc663076d03c2d04f
--! Hash: sha1:c7a2bbbc37e542044a5286fea7613176bd216c61
--! Message: Reputation: hourly counters per project and SES account, thresholds and pauses, GetAccount's standing, project events, mailroom_reputation()

-- Reputation guardrails (§19): hard bounces and complaints over sent recipients, per project and
-- per SES account, read from hourly counters that the statement recording each event moves.

-- One row per project, hour, metric and connection (shard = the backend pid, as for
-- project_daily_counts): two sends never wait on the same counter row. account_id is the
-- ses_accounts row the project was connected to when the event was recorded, so the account's
-- windows add up its projects' rows through one index.
create table if not exists reputation_counts (
  project_id text not null references projects(id) on delete cascade,
  account_id bigint not null references ses_accounts(id) on delete cascade,
  hour timestamptz not null,
  metric text not null check (metric in ('sent', 'bounced', 'complained')),
  shard integer not null default 0,
  n bigint not null,
  primary key (project_id, account_id, hour, metric, shard)
);
create index if not exists reputation_counts_account_idx on reputation_counts (account_id, hour);
create index if not exists reputation_counts_project_hour_idx on reputation_counts (project_id, hour);

-- A project's thresholds and pause. No row: the defaults, not paused, counting since ever.
-- counting_since is the last resume: both windows of both scopes start there for the project,
-- and `baseline` holds what the counters of that hour already held at the resume, so the hour is
-- split exactly although the counters are hourly.
create table if not exists project_reputation (
  project_id text primary key references projects(id) on delete cascade,
  bounce_warn double precision not null default 0.02 check (bounce_warn >= 0),
  bounce_pause double precision not null default 0.04 check (bounce_pause >= 0 and bounce_pause <= 0.05),
  complaint_warn double precision not null default 0.0005 check (complaint_warn >= 0),
  complaint_pause double precision not null default 0.0008 check (complaint_pause >= 0 and complaint_pause <= 0.001),
  paused_at timestamptz,
  pause_reason text,
  warned_at timestamptz,
  counting_since timestamptz,
  baseline jsonb,
  updated_at timestamptz not null default now(),
  check (bounce_warn <= bounce_pause and complaint_warn <= complaint_pause)
);

-- What GetAccount last said of the account (§19.5).
alter table ses_accounts add column if not exists enforcement_status text;
alter table ses_accounts add column if not exists sending_enabled boolean;
alter table ses_accounts add column if not exists account_checked_at timestamptz;

-- Project-wide webhook events (§19.6) are events too, so they are signed, retried and filtered
-- by the same machinery. They belong to no email: their email_id is a fresh id of the email
-- kind that names no email, which puts the event and its deliveries in the day's partitions
-- (and retention removes them with the day); the payload shows it as null.
alter table events drop constraint if exists events_type_check;
alter table events add constraint events_type_check check (type = any (array['email.sent', 'email.delivered',
  'email.delivery_delayed', 'email.bounced', 'email.complained', 'email.failed', 'email.opened', 'email.clicked', 'email.received',
  'project.reputation_warning', 'project.sending_paused', 'project.sending_resumed', 'account.enforcement_changed']));

/*
 * The one reading of a project's reputation windows (§19.2), which the worker, the API, /metrics
 * and ops.reputation all call. For each scope (the project, and its SES account) and window:
 * - `1h`: the counters of the current and the previous hour (since the previous hour's start);
 * - `representative`: back to the earlier of 24 h ago and the hour in which the last 10,000 sent
 *   recipients begin, at most 30 days back.
 * Both start no earlier than the project's last resume, whose hour counts only what came after
 * it (`baseline`). Reads at most 30 × 24 hourly rows per scope, whatever the volume.
 */
create or replace function mailroom_reputation(p_project text)
returns table (scope text, "window" text, sent bigint, bounced bigint, complained bigint, since timestamptz)
language sql stable as $$
  with st as (
    select r.counting_since, r.baseline, pc.ses_account_id as account_id,
           date_trunc('hour', now() - interval '30 days') as floor_hour
    from (select 1) one
    left join project_reputation r on r.project_id = p_project
    left join provider_connections pc on pc.project_id = p_project
  ),
  hourly as (
    select 'project'::text as scope, c.hour,
           sum(c.n) filter (where c.metric = 'sent') as sent,
           sum(c.n) filter (where c.metric = 'bounced') as bounced,
           sum(c.n) filter (where c.metric = 'complained') as complained
    from st join reputation_counts c on c.project_id = p_project
      and c.hour >= greatest(st.floor_hour, date_trunc('hour', coalesce(st.counting_since, '-infinity')))
    group by c.hour
    union all
    select 'account', c.hour,
           sum(c.n) filter (where c.metric = 'sent'),
           sum(c.n) filter (where c.metric = 'bounced'),
           sum(c.n) filter (where c.metric = 'complained')
    from st join reputation_counts c on c.account_id = st.account_id
      and c.hour >= greatest(st.floor_hour, date_trunc('hour', coalesce(st.counting_since, '-infinity')))
    group by c.hour
  ),
  -- The resume's hour counts only what came after the resume.
  adjusted as materialized (
    select h.scope, h.hour,
      coalesce(h.sent, 0) - case when h.hour = date_trunc('hour', st.counting_since) then coalesce((st.baseline -> h.scope ->> 'sent')::bigint, 0) else 0 end as sent,
      coalesce(h.bounced, 0) - case when h.hour = date_trunc('hour', st.counting_since) then coalesce((st.baseline -> h.scope ->> 'bounced')::bigint, 0) else 0 end as bounced,
      coalesce(h.complained, 0) - case when h.hour = date_trunc('hour', st.counting_since) then coalesce((st.baseline -> h.scope ->> 'complained')::bigint, 0) else 0 end as complained
    from hourly h cross join st
  ),
  -- Where the last 10,000 sent recipients begin: the newest hour from which back to now holds them.
  reach as materialized (
    select c.scope, max(c.hour) filter (where c.sent_back >= 10000) as hour
    from (select a.scope, a.hour, sum(a.sent) over (partition by a.scope order by a.hour desc) as sent_back from adjusted a) c
    group by c.scope
  ),
  starts as materialized (
    select s.scope,
      date_trunc('hour', now() - interval '1 hour') as hour_start,
      greatest(st.floor_hour, least(date_trunc('hour', now() - interval '24 hours'), coalesce(r.hour, st.floor_hour))) as rep_start
    from (values ('project'), ('account')) s(scope) cross join st
    left join reach r on r.scope = s.scope
    where s.scope = 'project' or st.account_id is not null
  )
  select s.scope, w.name, t.sent, t.bounced, t.complained, greatest(w.start, st.counting_since)
  from starts s
  cross join st
  cross join lateral (values ('1h', s.hour_start), ('representative', s.rep_start)) w(name, start)
  cross join lateral (
    select coalesce(sum(a.sent), 0)::bigint as sent, coalesce(sum(a.bounced), 0)::bigint as bounced,
           coalesce(sum(a.complained), 0)::bigint as complained
    from adjusted a where a.scope = s.scope and a.hour >= w.start) t
  order by s.scope desc, w.name
$$;
