--! Previous: sha1:90acc0212bfcc0466e3afb349b8abb31089a2794
--! Hash: sha1:b420b7b5e8f1b6e146725715860aa5dd2c7db29a
--! Message: Hostile mail and tenants, contacts, segments, topics, imports and broadcasts

-- Contacts, contact properties, segments and topics (CONTRACT §23.1). One contact per address and
-- project, case-insensitively; segments and topic subscriptions are rows of their own so a
-- segment's list and a topic's opt-outs read by index, flat at a million contacts.
create table if not exists contact_properties (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  key text not null check (key ~ '^[A-Za-z0-9_]{1,50}$'),
  type text not null check (type in ('string', 'number')),
  fallback_value jsonb,
  created_at timestamptz not null default now(),
  unique (project_id, key)
);
create index if not exists contact_properties_by_project on contact_properties (project_id, id);

create table if not exists contacts (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  email text not null,
  first_name text,
  last_name text,
  unsubscribed boolean not null default false,
  properties jsonb not null default '{}',
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index if not exists contacts_email_per_project on contacts (project_id, lower(email));
create index if not exists contacts_by_project on contacts (project_id, id);

create table if not exists segments (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  name text not null,
  created_at timestamptz not null default now()
);
create index if not exists segments_by_project on segments (project_id, id);

-- Membership carries its own time: a broadcast's recipients are the members when it was sent.
create table if not exists contact_segments (
  segment_id text not null references segments(id) on delete cascade,
  contact_id text not null references contacts(id) on delete cascade,
  project_id text not null references projects(id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (segment_id, contact_id)
);
create index if not exists contact_segments_by_contact on contact_segments (contact_id, segment_id);

create table if not exists topics (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  name text not null check (char_length(name) between 1 and 50),
  description text check (char_length(description) <= 200),
  default_subscription text not null check (default_subscription in ('opt_in', 'opt_out')),
  visibility text not null default 'private' check (visibility in ('public', 'private')),
  created_at timestamptz not null default now()
);
create index if not exists topics_by_project on topics (project_id, id);

-- A contact's explicit choice per topic; no row means the topic's default_subscription.
create table if not exists contact_topics (
  contact_id text not null references contacts(id) on delete cascade,
  topic_id text not null references topics(id) on delete cascade,
  project_id text not null references projects(id) on delete cascade,
  subscription text not null check (subscription in ('opt_in', 'opt_out')),
  updated_at timestamptz not null default now(),
  primary key (contact_id, topic_id)
);
create index if not exists contact_topics_by_topic on contact_topics (topic_id, subscription, contact_id);

-- Contact imports (CONTRACT §23.2). A long job is a row with a cursor: `bytes_done` is the offset
-- of the next unread CSV record and `lines_done` the line it ended on, advanced in the same
-- transaction as the contacts a batch wrote, so a worker that dies resumes without counting twice.
create table if not exists contact_imports (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  status text not null default 'queued' check (status in ('queued', 'in_progress', 'completed', 'failed')),
  on_conflict text not null check (on_conflict in ('upsert', 'skip')),
  -- The header's columns, and the plan resolved from column_map at upload: {field: index},
  -- properties {key: {index, type}}.
  header text[] not null,
  plan jsonb not null,
  segment_ids text[] not null default '{}',
  topics jsonb not null default '[]',
  bytes_total bigint not null,
  bytes_done bigint not null,
  lines_done bigint not null default 1,
  total integer not null default 0,
  created integer not null default 0,
  updated integer not null default 0,
  skipped integer not null default 0,
  failed integer not null default 0,
  errors jsonb not null default '[]',
  failure_reason text,
  created_at timestamptz not null default now(),
  started_at timestamptz,
  completed_at timestamptz
);
create index if not exists contact_imports_by_project on contact_imports (project_id, id);

-- The uploaded CSV, in pieces of about 1 MiB, kept until the import ends: the API streams the
-- upload in and the worker streams it out, neither holding the file.
create table if not exists contact_import_chunks (
  import_id text not null references contact_imports(id) on delete cascade deferrable initially deferred,
  project_id text not null references projects(id) on delete cascade,
  seq integer not null,
  start_byte bigint not null,
  data bytea not null,
  primary key (import_id, seq)
);
-- CSV compresses, but pglz on every megabyte costs the upload more than the disk it saves.
alter table contact_import_chunks alter column data set storage external;
-- Contact webhook events (§23.1) are project events: email_id a fresh id naming no email, shown as null.
alter table events drop constraint if exists events_type_check;
alter table events add constraint events_type_check check (type = any (array['email.sent', 'email.delivered',
  'email.delivery_delayed', 'email.bounced', 'email.complained', 'email.failed', 'email.opened', 'email.clicked', 'email.received',
  'project.reputation_warning', 'project.sending_paused', 'project.sending_resumed', 'account.enforcement_changed',
  'contact.created', 'contact.updated', 'contact.deleted', 'contact.topics.updated']));
-- Broadcasts (CONTRACT §23.3–§23.7). A broadcast is a row with a cursor: the broadcast__send task
-- pages the segment by contact id from `cursor`, writing a page of emails and the cursor in one
-- transaction, so a worker that dies loses nothing and the next run continues where it stopped.
create table if not exists broadcasts (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  name text not null default '',
  segment_id text not null,
  topic_id text,
  from_address text not null,
  reply_to_addresses text[] not null default '{}',
  subject text not null,
  preview_text text,
  html text,
  text text,
  template_id text,
  template_version integer,
  status text not null default 'draft' check (status in ('draft', 'scheduled', 'sending', 'sent', 'canceled')),
  scheduled_at timestamptz,
  -- Who receives it is fixed at this moment: segment membership made at or before it (§23.4).
  snapshot_at timestamptz,
  sent_at timestamptz,
  -- 'scheduled' or 'sending': what a cancel stopped, for Resend's status mapping.
  canceled_from text,
  -- The last contact id paged; null before the first page. paged_at: when the last page was made.
  cursor text,
  paged_at timestamptz,
  recipients integer not null default 0,
  suppressed integer not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index if not exists broadcasts_by_project on broadcasts (project_id, id);

-- One row per contact a broadcast reached, keyed so a re-run page can never make a second email
-- for a recipient; email_id is null for a recipient skipped as suppressed.
create table if not exists broadcast_recipients (
  broadcast_id text not null references broadcasts(id) on delete cascade,
  contact_id text not null,
  project_id text not null references projects(id) on delete cascade,
  email text not null,
  email_id text,
  -- Why no email was made: 'suppressed', or 'too_large' (its personalised message passed the limit).
  skipped text,
  created_at timestamptz not null default now(),
  primary key (broadcast_id, contact_id)
);
create index if not exists broadcast_recipients_by_contact on broadcast_recipients (contact_id, broadcast_id);
create index if not exists broadcast_recipients_by_email on broadcast_recipients (email_id) where email_id is not null;

-- A broadcast's emails are ordinary emails that know their broadcast: lists exclude them unless
-- asked, their events carry it, and the bounded queue ahead of a broadcast is counted by it.
alter table emails add column if not exists broadcast_id text;
create index if not exists emails_by_broadcast on emails (broadcast_id, id) where broadcast_id is not null;
create index if not exists emails_broadcast_unsent on emails (broadcast_id) where broadcast_id is not null and status in ('queued', 'sending');
-- A send under a topic (`topic_id` on POST /v1/emails): opted-out contacts are skipped at send.
alter table emails add column if not exists topic_id text;
-- Reputation counts are one truth (CONTRACT §22.9). Each event carries what it added to the
-- reputation counters (`reputation_metric`, `reputation_n`), written by the statement that records
-- it: the live path counts from these columns and `stats rebuild` sums the same columns, so the two
-- cannot disagree. A hard bounce or complaint about mail sent before its project's last resume is
-- `bounced_late` / `complained_late`: it counts in the account's windows of every other project on
-- the account, and not in its own project's (whose resume started them afresh).
alter table events add column if not exists reputation_metric text;
alter table events add column if not exists reputation_n integer;
alter table reputation_counts drop constraint if exists reputation_counts_metric_check;
alter table reputation_counts add constraint reputation_counts_metric_check
  check (metric in ('sent', 'bounced', 'complained', 'bounced_late', 'complained_late'));
-- Events without them (recorded before they existed, or loaded by hand): `stats rebuild` derives
-- theirs from the events and emails as before.

/*
 * The one reading of a project's reputation windows (§19.2); see migration 000030. The account
 * scope counts every project's bounces and complaints on the account, the late ones of the other
 * projects included; the project's own late ones count for neither of its scopes. No count is
 * ever below 0.
 */
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
           sum(c.n::int) filter (where c.metric = 'bounced' or (c.metric = 'bounced_late' and c.project_id <> p_project)),
           sum(c.n::int) filter (where c.metric = 'complained' or (c.metric = 'complained_late' and c.project_id <> p_project))
    from st join reputation_counts c on c.account_id = st.account_id
      and c.hour >= greatest(st.floor_hour, date_trunc('hour', coalesce(st.counting_since, '-infinity')))
    group by c.hour
  ),
  -- The resume's hour counts only what came after the resume.
  adjusted as materialized (
    select h.scope, h.hour,
      greatest(0, coalesce(h.sent, 0) - case when h.hour = date_trunc('hour', st.counting_since) then coalesce((st.baseline -> h.scope ->> 'sent')::bigint, 0) else 0 end) as sent,
      greatest(0, coalesce(h.bounced, 0) - case when h.hour = date_trunc('hour', st.counting_since) then coalesce((st.baseline -> h.scope ->> 'bounced')::bigint, 0) else 0 end) as bounced,
      greatest(0, coalesce(h.complained, 0) - case when h.hour = date_trunc('hour', st.counting_since) then coalesce((st.baseline -> h.scope ->> 'complained')::bigint, 0) else 0 end) as complained
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
-- §22.1/§22.4: a received message over a parse budget, unreadable, or failing five times is
-- stored from its notification's headers, marked so.
alter table received_emails add column if not exists parse_failed boolean not null default false;
