-- Operator views. Re-applied after every migration run, so they always match the schema.
create schema if not exists ops;

create or replace view ops.queue as
select task_identifier as task,
       case when locked_at is not null then 'running'
            when attempts >= max_attempts then 'dead'
            when run_at > now() then 'scheduled'
            else 'ready' end as state,
       count(*) as jobs,
       now() - min(coalesce(locked_at, run_at)) as oldest_age
from graphile_worker.jobs
group by 1, 2;

create or replace view ops.email_pipeline as
select project_id,
       status,
       count(*) as emails,
       now() - min(created_at) filter (where status = 'queued') as oldest_queued_age,
       count(*) filter (where status = 'sent' and sent_at > now() - interval '5 minutes') as sent_last_5m,
       count(*) filter (where status = 'sent' and sent_at > now() - interval '60 minutes') as sent_last_60m
from emails
group by project_id, status;

create or replace view ops.webhook_health as
select e.project_id,
       e.id as endpoint_id,
       e.url,
       e.status,
       e.consecutive_failures,
       count(d.*) filter (where d.status = 'pending') as pending_deliveries,
       round(100.0 * count(d.*) filter (where d.status = 'delivered' and d.created_at > now() - interval '24 hours')
             / nullif(count(d.*) filter (where d.status <> 'pending' and d.created_at > now() - interval '24 hours'), 0), 1)
         as success_rate_24h_pct,
       (select d2.error from webhook_deliveries d2
         where d2.endpoint_id = e.id and d2.project_id = e.project_id and d2.error is not null
         order by d2.id desc limit 1) as last_error
from webhook_endpoints e
left join webhook_deliveries d on d.endpoint_id = e.id and d.project_id = e.project_id
group by e.project_id, e.id;

create or replace view ops.stuck as
select 'email' as kind, project_id, id, status, now() - updated_at as age
from emails
where status = 'sending' and updated_at < now() - interval '5 minutes'
union all
select 'webhook_delivery', project_id, id, status, now() - next_attempt_at
from webhook_deliveries
where status = 'pending' and next_attempt_at < now() - interval '5 minutes';

create or replace view ops.domains as
select project_id, id, value, region, verification_status, dkim_status, mail_from_status,
       now() - last_checked_at as last_check_age
from domains;

-- Per SES connection: the pace sends are held to, the daily quota and its use, throttles, and
-- when the next send may go.
create or replace view ops.providers as
select pc.project_id,
       pc.region,
       a.max_send_rate as account_max_send_rate,
       pc.rate_cap,
       least(coalesce(a.max_send_rate, 1),
             coalesce((select min(o.rate_cap) from provider_connections o where o.ses_account_id = a.id), 'infinity'::float8))
         / (case when a.slowed_until > now() then 2 else 1 end) as send_rate,
       a.slowed_until > now() as slowed,
       a.max_24_hour_send,
       -- Recipients, as SES counts them, of every project on the account, by hour.
       (select coalesce(sum(u.recipients), 0) from ses_account_usage u
         where u.account_id = a.id and u.hour > now() - interval '24 hours')::bigint as sent_last_24h,
       (select count(*) from provider_throttles t
         where t.project_id = pc.project_id and t.throttled_at > now() - interval '1 hour') as throttles_last_hour,
       greatest(a.next_send_slot, now()) as next_send_slot,
       a.quota_checked_at,
       a.id as ses_account_id,
       (select count(*) from provider_connections o where o.ses_account_id = a.id) as projects_on_account
from provider_connections pc
join ses_accounts a on a.id = pc.ses_account_id;
