--! Previous: sha1:e9214a905b5fb3053a73d441990b8367f7a1f099
--! Hash: sha1:0fd269a8800b9f904625dee10d9562287b5ea84f
--! Message: SES accounts: one pace and daily recipient count per access key and region; heartbeats declare pools ended

-- SES counts every recipient against the send rate and the daily quota of the AWS account in its
-- region. One row per account and region carries the pace and the daily count that every
-- project connected with that access key id shares. The account is known by a digest of its
-- access key id, so the row holds no copy of the key.
create table if not exists ses_accounts (
  id bigint generated always as identity primary key,
  region text not null,
  access_key_digest bytea not null,
  max_send_rate double precision check (max_send_rate > 0),
  max_24_hour_send double precision check (max_24_hour_send >= 0),
  quota_checked_at timestamptz,
  next_send_slot timestamptz not null default now(),
  slowed_until timestamptz,
  -- The send slots taken in the last window (time and recipients), so no window ever holds more
  -- recipients than the rate, whatever mix of recipient counts the emails have.
  recent_slots_at timestamptz[] not null default '{}',
  recent_slots_n integer[] not null default '{}',
  created_at timestamptz not null default now(),
  unique (region, access_key_digest)
);

-- The daily count as a running counter: recipients per account and hour, so the check reads at
-- most 25 rows whatever the volume.
create table if not exists ses_account_usage (
  account_id bigint not null references ses_accounts(id) on delete cascade,
  hour timestamptz not null,
  recipients bigint not null check (recipients >= 0),
  primary key (account_id, hour)
);

alter table provider_connections add column if not exists ses_account_id bigint references ses_accounts(id);
create index if not exists provider_connections_ses_account_idx on provider_connections (ses_account_id);

-- Existing connections move to their account, with the quota, pace and 24-hour count they had.
do $$
begin
  if exists (select 1 from information_schema.columns where table_name = 'provider_connections' and column_name = 'next_send_slot') then
    insert into ses_accounts (region, access_key_digest, max_send_rate, max_24_hour_send, quota_checked_at, next_send_slot, slowed_until)
    select region, sha256(convert_to(access_key_id, 'UTF8')), min(max_send_rate), min(max_24_hour_send), max(quota_checked_at),
           max(next_send_slot), max(slowed_until)
    from provider_connections group by 1, 2
    on conflict (region, access_key_digest) do nothing;
    update provider_connections pc set ses_account_id = a.id from ses_accounts a
    where pc.ses_account_id is null and a.region = pc.region and a.access_key_digest = sha256(convert_to(pc.access_key_id, 'UTF8'));
    insert into ses_account_usage (account_id, hour, recipients)
    select pc.ses_account_id, date_trunc('hour', e.sent_at),
           sum(cardinality(e.to_addresses) + cardinality(e.cc_addresses) + cardinality(e.bcc_addresses))
    from emails e join provider_connections pc on pc.project_id = e.project_id
    where e.sent_at > greatest(now() - interval '24 hours', pc.created_at)
    group by 1, 2
    on conflict (account_id, hour) do nothing;
    -- ops.providers reads these columns; sql/ops.sql defines it again after the migrations.
    drop view if exists ops.providers;
    alter table provider_connections
      drop column max_send_rate, drop column max_24_hour_send, drop column quota_checked_at,
      drop column next_send_slot, drop column slowed_until;
  end if;
end $$;
alter table provider_connections alter column ses_account_id set not null;

/*
 * Takes the next free send slots of the project's SES account for an email of `p_recipients`
 * recipients, in one call: the account row is locked first, so every read after it is current
 * and two workers never share a slot or miscount the day.
 * - Spent daily quota: `quota_wait_ms`, when the oldest hour of the window ages out (1 s to 10 min).
 * - Slot further than `p_max_wait_ms` ahead: `retry_in_ms`, nothing taken.
 * - Otherwise `wait_ms` until the slot, which is taken: the pace moves on by one spacing per
 *   recipient, and the recipients count for the slot's hour.
 * Slots are evenly spaced at `p_headroom` × the rate per recipient, and no window of 1 s /
 * `p_headroom` holds more recipients than the rate, so a send up to that much late never puts
 * more than the rate into any second.
 */
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

-- Heartbeats: a pool is declared ended (stopped, or silent while its judge was beating
-- throughout) rather than forgotten, so its leases can be taken over at once and never by the
-- mere absence of a row.
alter table worker_heartbeats add column if not exists ended_at timestamptz;
alter table worker_heartbeats add column if not exists jobs_released boolean not null default false;
update worker_heartbeats set ended_at = now() where last_seen_at = '-infinity' and ended_at is null;
