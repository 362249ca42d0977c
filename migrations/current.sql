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
