--! Previous: sha1:9cc9d9ea41aeb0fdde10bac117a1710c6a3b68ff
--! Hash: sha1:07033f6304c37f3f78bbd39e14f7aa83e23f4865
--! Message: Reputation: mailroom_reputation() in PL/pgSQL with integer sums, its plan kept per connection

-- mailroom_reputation() in PL/pgSQL, its statement's plan kept per connection (a SQL function's
-- CTEs were planned again at every call), and its sums over integers rather than numeric: about
-- 10-15% off a reading of 30 days of hourly counters.
create or replace function mailroom_reputation(p_project text)
returns table (scope text, "window" text, sent bigint, bounced bigint, complained bigint, since timestamptz)
language plpgsql stable as $$
#variable_conflict use_column
begin
  return query

  with st as (
    select r.counting_since, r.baseline, pc.ses_account_id as account_id,
           date_trunc('hour', now() - interval '30 days') as floor_hour
    from (select 1) one
    left join project_reputation r on r.project_id = p_project
    left join provider_connections pc on pc.project_id = p_project
  ),
  hourly as (
    select 'project'::text as scope, c.hour,
           sum(c.n::int) filter (where c.metric = 'sent') as sent,
           sum(c.n::int) filter (where c.metric = 'bounced') as bounced,
           sum(c.n::int) filter (where c.metric = 'complained') as complained
    from st join reputation_counts c on c.project_id = p_project
      and c.hour >= greatest(st.floor_hour, date_trunc('hour', coalesce(st.counting_since, '-infinity')))
    group by c.hour
    union all
    select 'account', c.hour,
           sum(c.n::int) filter (where c.metric = 'sent'),
           sum(c.n::int) filter (where c.metric = 'bounced'),
           sum(c.n::int) filter (where c.metric = 'complained')
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
    from (select a.scope, a.hour, sum(a.sent::int) over (partition by a.scope order by a.hour desc) as sent_back from adjusted a) c
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
    select coalesce(sum(a.sent::int), 0)::bigint as sent, coalesce(sum(a.bounced::int), 0)::bigint as bounced,
           coalesce(sum(a.complained::int), 0)::bigint as complained
    from adjusted a where a.scope = s.scope and a.hour >= w.start) t
  order by s.scope desc, w.name;
end
$$;
