--! Previous: sha1:e4e3f35b6cb8b840ff3cc6f808a322bf23551a0a
--! Hash: sha1:e7835b43c95962beaf37d88c1d70645d9be465da
--! Message: Recipients: email_recipients, every address of to, cc and bcc in page order, partitioned by day like email_tags

-- Finding an email by recipient (CONTRACT §21.5): every address an email was sent to (to, cc and
-- bcc), bare and lower-cased, one row each, read in page order as email_tags is for tags. A rare
-- address costs what a common one does: the page's rows, never a scan of the project's emails.
-- Split by email_id into the same day partitions as emails, so retention drops a day of it with
-- the day's emails. Re-runnable: the table is made and filled once.

-- The bare address of a stored recipient such as `"Ann" <Ann@Example.com>`, lower-cased. The
-- send path, this fill and `stats rebuild` all use it, so they agree on every entry.
create or replace function mailroom_bare_address(recipient text) returns text
language sql immutable parallel safe as $$
  select lower(btrim(coalesce(substring(recipient from '<([^<>]*)>\s*$'), recipient)))
$$;

do $$
declare
  part record;
begin
  if to_regclass('email_recipients') is not null then return; end if;
  create table email_recipients (
    project_id text not null,
    address text not null,
    email_id text not null
  ) partition by range (email_id);
  -- One partition for each of emails' (its days, and a migrated database's `_before`), same bounds.
  for part in
    select c.relname, pg_get_expr(c.relpartbound, c.oid) as bound
    from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = 'emails'::regclass and not i.inhdetachpending
  loop
    execute format('create table %I partition of email_recipients %s', 'email_recipients' || substr(part.relname, length('emails') + 1), part.bound);
  end loop;
  insert into email_recipients (project_id, address, email_id)
  select distinct e.project_id, mailroom_bare_address(a), e.id
  from emails e cross join lateral unnest(e.to_addresses || e.cc_addresses || e.bcc_addresses) a;
  alter table email_recipients add primary key (project_id, address, email_id);
  analyze email_recipients;
end
$$;

-- The day's tables now include email_recipients; otherwise as in 000023.
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
      foreach parent in array array['emails', 'events', 'webhook_deliveries', 'email_tags', 'email_recipients'] loop
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

-- Deleting a project by hand takes its recipient entries too; otherwise as in 000024.
create or replace function mailroom_delete_project_rows() returns trigger
language plpgsql as $$
begin
  delete from webhook_deliveries where project_id in (select id from gone);
  delete from events where project_id in (select id from gone);
  delete from email_tags where project_id in (select id from gone);
  delete from email_recipients where project_id in (select id from gone);
  delete from emails where project_id in (select id from gone);
  return null;
end $$;
