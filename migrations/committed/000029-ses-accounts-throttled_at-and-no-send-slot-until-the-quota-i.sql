--! Previous: sha1:e7835b43c95962beaf37d88c1d70645d9be465da
--! Hash: sha1:556d8edc928996df5d9ab0bfc663076d03c2d04f
--! Message: SES accounts: throttled_at, and no send slot until the quota is read again after a throttle

-- Enter migration here

-- §16.2: when SES last throttled the account. Until its quota is read again after that, no send
-- slot is handed out (mailroom_take_send_slots), in any worker process.
alter table ses_accounts add column if not exists throttled_at timestamptz;

create or replace function mailroom_take_send_slots(p_project_id text, p_recipients integer, p_headroom float8, p_max_wait_ms float8, p_unknown_rate float8)
returns table (account_id bigint, slot_at timestamptz, wait_ms float8, retry_in_ms float8, quota_wait_ms float8)
language plpgsql volatile as $$
#variable_conflict use_column
declare
  a ses_accounts%rowtype;
  v_now timestamptz;
  v_rate float8;
  v_spacing interval;
  v_window interval;
  v_slot timestamptz;
  v_free timestamptz;
  v_used bigint;
  v_oldest timestamptz;
begin
  select sa.* into a from ses_accounts sa
  where sa.id = (select pc.ses_account_id from provider_connections pc where pc.project_id = p_project_id)
  for update;
  if not found then return; end if;
  v_now := clock_timestamp();
  account_id := a.id;

  if a.max_24_hour_send is not null then
    select coalesce(sum(u.recipients), 0), min(u.hour) into v_used, v_oldest
    from ses_account_usage u where u.account_id = a.id and u.hour > v_now - interval '25 hours';
    if v_used > 0 and v_used + p_recipients > a.max_24_hour_send then
      quota_wait_ms := least(600000, greatest(1000, extract(epoch from (v_oldest + interval '25 hours' - v_now)) * 1000));
      return next;
      return;
    end if;
  end if;

  -- A throttle not yet followed by a fresh read of the account's quota (§16.2): SES's rate may
  -- have dropped below the one the slots are spaced for, so no process takes a slot until the
  -- quota has been read again. Bounded by GetAccount's own 10 s timeout, should the read fail.
  if a.throttled_at > coalesce(a.quota_checked_at, '-infinity') and a.throttled_at > v_now - interval '10 seconds' then
    retry_in_ms := 250;
    return next;
    return;
  end if;

  v_rate := least(coalesce(a.max_send_rate, p_unknown_rate),
                  coalesce((select min(pc.rate_cap) from provider_connections pc where pc.ses_account_id = a.id), 'infinity'::float8))
            / (case when a.slowed_until > v_now then 2 else 1 end);
  v_spacing := make_interval(secs => 1.0 / (p_headroom * v_rate));
  v_window := make_interval(secs => 1.0 / p_headroom);
  v_slot := greatest(a.next_send_slot, v_now);
  -- The newest slot that must fall out of the window before this one fits in it.
  select max(t) into v_free from (
    select t, sum(n) over (order by t desc rows between unbounded preceding and current row) as newer
    from unnest(a.recent_slots_at, a.recent_slots_n) as r(t, n)
  ) w where w.newer + p_recipients > v_rate;
  if v_free is not null then v_slot := greatest(v_slot, v_free + v_window); end if;

  if v_slot > v_now + make_interval(secs => p_max_wait_ms / 1000) then
    retry_in_ms := extract(epoch from (v_slot - v_now)) * 1000;
    return next;
    return;
  end if;

  update ses_accounts set
    next_send_slot = v_slot + v_spacing * p_recipients,
    recent_slots_at = array(select t from unnest(a.recent_slots_at || v_slot, a.recent_slots_n || p_recipients) as r(t, n) where t > v_slot - v_window order by t),
    recent_slots_n = array(select n from unnest(a.recent_slots_at || v_slot, a.recent_slots_n || p_recipients) as r(t, n) where t > v_slot - v_window order by t)
  where id = a.id;
  insert into ses_account_usage as u (account_id, hour, recipients) values (a.id, date_trunc('hour', v_slot), p_recipients)
  on conflict (account_id, hour) do update set recipients = u.recipients + excluded.recipients;
  slot_at := v_slot;
  wait_ms := greatest(0, extract(epoch from (v_slot - v_now)) * 1000);
  return next;
end $$;
