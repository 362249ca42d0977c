--! Previous: sha1:601cf088cebf311c12a789abd2300e6bcc525fb6
--! Hash: sha1:7b7cf6bb6144a203ed0cf4a2f47df154b2da03f8
--! Message: Reputation: mailroom_reputation() reads the hours newest first and stops where the last 10,000 sent recipients begin

-- mailroom_reputation() reads only the hours its windows need. The representative window goes
-- back until the last 10,000 sent recipients: the hours are now read newest first, through the
-- (project_id, hour) or (account_id, hour) index, and the reading stops at the hour that reaches
-- 10,000, so a busy project reads a day or a few of counters rather than 30 days of them, and a
-- quiet one reads the few hours it sent in. Both windows' sums then read the hours from the
-- representative window's start. The windows, their starts and their sums are those of migration
-- 000034.
create or replace function mailroom_reputation(p_project text)
returns table (scope text, "window" text, sent bigint, bounced bigint, complained bigint, since timestamptz)
language plpgsql stable as $$
#variable_conflict use_column
declare
  v_since timestamptz;
  v_baseline jsonb;
  v_account bigint;
  v_floor timestamptz := date_trunc('hour', now() - interval '30 days');
  v_hour_start timestamptz := date_trunc('hour', now() - interval '1 hour');
  v_day_start timestamptz := date_trunc('hour', now() - interval '24 hours');
  v_from timestamptz;
  v_resume_hour timestamptz;
  v_reach timestamptz;
  v_start timestamptz;
  v_scope text;
begin
  select r.counting_since, r.baseline into v_since, v_baseline from project_reputation r where r.project_id = p_project;
  select pc.ses_account_id into v_account from provider_connections pc where pc.project_id = p_project;
  v_from := greatest(v_floor, date_trunc('hour', coalesce(v_since, '-infinity')));
  v_resume_hour := date_trunc('hour', v_since);

  foreach v_scope in array case when v_account is null then array['project'] else array['project', 'account'] end loop
    -- The newest hour from which back to now holds 10,000 sent recipients: the scope's hours newest
    -- first, each summed over its metrics and shards as it streams from the index, until one
    -- reaches it. The resume's hour counts only what came after the resume (its baseline off).
    if v_scope = 'project' then
      select h.hour into v_reach from (
        select x.hour, sum(x.sent) over (order by x.hour desc) as sent_back from (
          select c.hour, greatest(0, coalesce(sum(c.n::int) filter (where c.metric = 'sent'), 0)
            - case when c.hour = v_resume_hour then coalesce((v_baseline -> 'project' ->> 'sent')::int, 0) else 0 end) as sent
          from reputation_counts c where c.project_id = p_project and c.hour >= v_from
          group by c.hour order by c.hour desc) x) h
      where h.sent_back >= 10000 limit 1;
    else
      select h.hour into v_reach from (
        select x.hour, sum(x.sent) over (order by x.hour desc) as sent_back from (
          select c.hour, greatest(0, coalesce(sum(c.n::int) filter (where c.metric = 'sent'), 0)
            - case when c.hour = v_resume_hour then coalesce((v_baseline -> 'account' ->> 'sent')::int, 0) else 0 end) as sent
          from reputation_counts c where c.account_id = v_account and c.hour >= v_from
          group by c.hour order by c.hour desc) x) h
      where h.sent_back >= 10000 limit 1;
    end if;
    v_start := greatest(v_floor, least(v_day_start, coalesce(v_reach, v_floor)));

    -- Both windows' sums over the hours from the representative window's start (the last hour's
    -- start is never earlier), each hour adjusted as above. The account counts every project's
    -- bounces and complaints, the late ones of the other projects included.
    if v_scope = 'project' then
      return query
      select v_scope, w.name, w.sent, w.bounced, w.complained, greatest(w.start, v_since)
      from (
        select coalesce(sum(a.sent) filter (where a.hour >= v_hour_start), 0)::bigint as sent_1h,
               coalesce(sum(a.bounced) filter (where a.hour >= v_hour_start), 0)::bigint as bounced_1h,
               coalesce(sum(a.complained) filter (where a.hour >= v_hour_start), 0)::bigint as complained_1h,
               coalesce(sum(a.sent), 0)::bigint as sent_rep,
               coalesce(sum(a.bounced), 0)::bigint as bounced_rep,
               coalesce(sum(a.complained), 0)::bigint as complained_rep
        from (
          select h.hour,
            greatest(0, coalesce(h.sent, 0) - case when h.hour = v_resume_hour then coalesce((v_baseline -> v_scope ->> 'sent')::int, 0) else 0 end) as sent,
            greatest(0, coalesce(h.bounced, 0) - case when h.hour = v_resume_hour then coalesce((v_baseline -> v_scope ->> 'bounced')::int, 0) else 0 end) as bounced,
            greatest(0, coalesce(h.complained, 0) - case when h.hour = v_resume_hour then coalesce((v_baseline -> v_scope ->> 'complained')::int, 0) else 0 end) as complained
          from (
            select c.hour,
                   sum(c.n::int) filter (where c.metric = 'sent') as sent,
                   sum(c.n::int) filter (where c.metric = 'bounced') as bounced,
                   sum(c.n::int) filter (where c.metric = 'complained') as complained
            from reputation_counts c where c.project_id = p_project and c.hour >= greatest(v_from, v_start)
            group by c.hour) h) a) t
      cross join lateral (values ('1h', v_hour_start, t.sent_1h, t.bounced_1h, t.complained_1h),
                                 ('representative', v_start, t.sent_rep, t.bounced_rep, t.complained_rep)) w(name, start, sent, bounced, complained)
      order by w.name;
    else
      return query
      select v_scope, w.name, w.sent, w.bounced, w.complained, greatest(w.start, v_since)
      from (
        select coalesce(sum(a.sent) filter (where a.hour >= v_hour_start), 0)::bigint as sent_1h,
               coalesce(sum(a.bounced) filter (where a.hour >= v_hour_start), 0)::bigint as bounced_1h,
               coalesce(sum(a.complained) filter (where a.hour >= v_hour_start), 0)::bigint as complained_1h,
               coalesce(sum(a.sent), 0)::bigint as sent_rep,
               coalesce(sum(a.bounced), 0)::bigint as bounced_rep,
               coalesce(sum(a.complained), 0)::bigint as complained_rep
        from (
          select h.hour,
            greatest(0, coalesce(h.sent, 0) - case when h.hour = v_resume_hour then coalesce((v_baseline -> v_scope ->> 'sent')::int, 0) else 0 end) as sent,
            greatest(0, coalesce(h.bounced, 0) - case when h.hour = v_resume_hour then coalesce((v_baseline -> v_scope ->> 'bounced')::int, 0) else 0 end) as bounced,
            greatest(0, coalesce(h.complained, 0) - case when h.hour = v_resume_hour then coalesce((v_baseline -> v_scope ->> 'complained')::int, 0) else 0 end) as complained
          from (
            select c.hour,
                   sum(c.n::int) filter (where c.metric = 'sent') as sent,
                   sum(c.n::int) filter (where c.metric = 'bounced' or (c.metric = 'bounced_late' and c.project_id <> p_project)) as bounced,
                   sum(c.n::int) filter (where c.metric = 'complained' or (c.metric = 'complained_late' and c.project_id <> p_project)) as complained
            from reputation_counts c where c.account_id = v_account and c.hour >= greatest(v_from, v_start)
            group by c.hour) h) a) t
      cross join lateral (values ('1h', v_hour_start, t.sent_1h, t.bounced_1h, t.complained_1h),
                                 ('representative', v_start, t.sent_rep, t.bounced_rep, t.complained_rep)) w(name, start, sent, bounced, complained)
      order by w.name;
    end if;
  end loop;
end
$$;
