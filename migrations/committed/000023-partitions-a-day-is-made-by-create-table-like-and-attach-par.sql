--! Previous: sha1:e20bbd26384f309bcdfed32340a316367a549c52
--! Hash: sha1:94323525b676cc337519093a2c4a221a9876c2c8
--! Message: Partitions: a day is made by CREATE TABLE LIKE and ATTACH PARTITION, so making one never waits on or stalls sends

-- A day's partitions are made without locking their parents against sends: each table is made on
-- its own (CREATE TABLE … LIKE), given a CHECK matching its bounds, and attached, which takes only
-- SHARE UPDATE EXCLUSIVE on the parent (CREATE TABLE … PARTITION OF takes ACCESS EXCLUSIVE, so
-- every send and read queued behind it). The CHECK spares ATTACH a scan and goes once attached.
-- The four tables of a day are made in the function's one transaction, so a crash leaves none: a
-- `<table>_pYYYYMMDD` table outside its parent is only ever a day retention was removing
-- (src/retention/partitions.ts finishes those). Re-runnable: create or replace.
create or replace function mailroom_ensure_partitions(first_day date, last_day date) returns int
language plpgsql as $$
declare
  d date;
  parent text;
  part text;
  key text;
  low text;
  high text;
  made int;
  created int := 0;
begin
  for d in select generate_series(first_day, last_day, interval '1 day')::date loop
    made := 0;
    low := mailroom_id_floor('email_', d::timestamp at time zone 'UTC');
    high := mailroom_id_floor('email_', (d + 1)::timestamp at time zone 'UTC');
    begin
      foreach parent in array array['emails', 'events', 'webhook_deliveries', 'email_tags'] loop
        part := parent || '_p' || to_char(d, 'YYYYMMDD');
        continue when to_regclass(quote_ident(part)) is not null;
        key := case parent when 'emails' then 'id' else 'email_id' end;
        execute format('create table %I (like %I including all excluding indexes)', part, parent);
        execute format('alter table %I add constraint %I check (%I is not null and %I >= %L and %I < %L)',
          part, part || '_bounds', key, key, low, key, high);
        execute format('alter table %I attach partition %I for values from (%L) to (%L)', parent, part, low, high);
        execute format('alter table %I drop constraint %I', part, part || '_bounds');
        made := made + 1;
      end loop;
      created := created + made;
    exception when invalid_object_definition then
      -- The day overlaps the `_before` partition a migrated database may have: its rows go there.
      raise notice 'partitions of % skipped: the day lies in an existing partition', d;
    end;
  end loop;
  return created;
end
$$;
