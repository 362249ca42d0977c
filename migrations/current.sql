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

-- §22.1/§22.4: a received message over a parse budget, unreadable, or failing five times is
-- stored from its notification's headers, marked so.
alter table received_emails add column if not exists parse_failed boolean not null default false;
