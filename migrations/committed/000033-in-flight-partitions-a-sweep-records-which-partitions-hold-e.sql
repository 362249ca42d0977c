--! Previous: sha1:07033f6304c37f3f78bbd39e14f7aa83e23f4865
--! Hash: sha1:90acc0212bfcc0466e3afb349b8abb31089a2794
--! Message: In-flight partitions: a sweep records which partitions hold emails sending or deliveries pending, for ops.stuck

-- The partitions that may hold work in flight (emails `sending`, webhook deliveries `pending`),
-- as a sweep found them, so that ops.stuck reads those alone rather than every day kept
-- (CONTRACT §18.16). The worker sweeps each minute; ops.stuck trusts a sweep for 4 minutes, and
-- reads every partition when the last one is older (no worker running).
create table if not exists inflight_partitions (
  partition text primary key
);
create table if not exists inflight_sweep (
  only_row boolean primary key default true check (only_row),
  swept_at timestamptz not null
);

-- Records the partitions of emails and webhook_deliveries that hold an email `sending` or a
-- delivery `pending`, and when. Each lookup runs on a small partial index of each partition.
create or replace function mailroom_sweep_inflight() returns int
language plpgsql as $$
declare
  found text[];
begin
  select coalesce(array_agg(distinct p), '{}') into found from (
    select tableoid::regclass::text as p from emails where status = 'sending'
    union all
    select tableoid::regclass::text from webhook_deliveries where status = 'pending') t;
  delete from inflight_partitions where partition <> all (found);
  insert into inflight_partitions (partition) select unnest(found) on conflict do nothing;
  insert into inflight_sweep (swept_at) values (now())
  on conflict (only_row) do update set swept_at = excluded.swept_at;
  return cardinality(found);
end
$$;
