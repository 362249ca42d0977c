-- Where retention stands (CONTRACT §18.6), by the database's clock: the oldest and newest day
-- partitions of emails, the oldest one's age (from the start of its UTC day), how many days
-- ahead are made (accepts need today's), days a removal left unfinished (detached or pending
-- detach), and what holds days back: the oldest unsent email and the earliest pending webhook
-- delivery's next attempt. Reads the catalog and two small partial indexes (unsent emails, pending deliveries).
create or replace view ops.retention as
with days as (
  select to_date(substr(c.relname, length('emails_p') + 1), 'YYYYMMDD') as day
  from pg_inherits i join pg_class c on c.oid = i.inhrelid
  where i.inhparent = 'emails'::regclass and not i.inhdetachpending and c.relname ~ '^emails_p[0-9]{8}$'),
span as (select min(day) as oldest, max(day) as newest, count(*) as n from days)
select s.oldest as oldest_day,
       extract(epoch from now() - (s.oldest::timestamp at time zone 'UTC'))::bigint as oldest_day_age_seconds,
       s.newest as newest_day,
       s.newest - (now() at time zone 'UTC')::date as days_ahead,
       s.n as day_partitions,
       (select count(distinct substring(c.relname from '_p([0-9]{8})$'))
        from pg_class c left join pg_inherits i on i.inhrelid = c.oid
        where c.relkind = 'r' and pg_table_is_visible(c.oid)
          and c.relname ~ '^(emails|events|webhook_deliveries|email_tags|email_recipients)_p[0-9]{8}$'
          and (i.inhrelid is null or i.inhdetachpending)) as unfinished_days,
       (select min(created_at) from emails where status in ('scheduled', 'queued', 'sending')) as oldest_unsent_created_at,
       (select min(next_attempt_at) from webhook_deliveries where status = 'pending') as next_pending_delivery_at
from span s;
