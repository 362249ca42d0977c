--! Previous: sha1:c954f6ec71a63e23e436aed9a3398484e4739552
--! Hash: sha1:601cf088cebf311c12a789abd2300e6bcc525fb6
--! Message: In-flight reads plan the day partitions of recent ids up to tomorrow's, not the days made ahead

-- The partitions of the last 4 hours' ids end at tomorrow's: later day partitions are made ahead
-- of time and hold nothing in flight (ids follow the database's clock), and each read in flight
-- planned them on every call (seven more partitions, about 0.7 ms of the overview's 2.3). A row
-- there all the same (a clock set back by days) is found by the sweep, as an older partition's is,
-- and read from that partition.
create or replace function mailroom_inflight_from(parent regclass, columns text, back interval) returns text
language plpgsql stable as $$
declare
  sweep record;
  key text := case when parent = 'emails'::regclass then 'id' else 'email_id' end;
  recent text := mailroom_id_floor('email_', now() - interval '4 hours');
  ahead text := mailroom_id_floor('email_', date_trunc('day', now() at time zone 'UTC') at time zone 'UTC' + interval '2 days');
  parts text;
begin
  select swept_at, continuous_since into sweep from inflight_sweep;
  if sweep.swept_at is null or sweep.swept_at <= now() - interval '4 minutes'
     or (back > interval '0' and (sweep.continuous_since is null or sweep.continuous_since > now() - back - interval '5 minutes')) then
    return format('(select %s from %s)', columns, parent);
  end if;
  select string_agg(format('select %s from %s where (%I < %L or %I >= %L)', columns, i.inhrelid::regclass, key, recent, key, ahead), ' union all ')
    into parts
  from inflight_partitions f
  join pg_inherits i on i.inhrelid = to_regclass(f.partition)
  where i.inhparent = parent and f.found_at > now() - back - interval '5 minutes';
  return format('(select %s from %s where %I >= %L and %I < %L%s)', columns, parent, key, recent, key, ahead, coalesce(' union all ' || parts, ''));
end
$$;
