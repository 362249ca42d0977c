--! Previous: -
--! Hash: sha1:ba021055c4b0303f69b587015a6e7d894752f49f

-- Every tenant-owned row carries project_id, and every query filters on it.

create table projects (
  id text primary key,
  name text not null check (length(name) between 1 and 200),
  created_at timestamptz not null default now()
);

-- The first registration claims the instance; the dashboard is the only writer.
create table owner_accounts (
  id text primary key,
  email text not null unique,
  password_hash text not null,
  created_at timestamptz not null default now()
);

create table api_keys (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  name text not null check (length(name) between 1 and 200),
  key_prefix text not null,
  key_hash bytea not null unique,
  created_at timestamptz not null default now(),
  last_used_at timestamptz,
  revoked_at timestamptz
);
create index api_keys_project_idx on api_keys (project_id, id);

create table emails (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  status text not null default 'queued' check (status in ('queued', 'sending', 'sent', 'failed')),
  from_address text not null,
  to_addresses text[] not null,
  cc_addresses text[] not null default '{}',
  bcc_addresses text[] not null default '{}',
  reply_to_addresses text[] not null default '{}',
  subject text not null,
  html text,
  text text,
  headers jsonb not null default '{}',
  attachments jsonb not null default '[]',
  message_id_header text,
  provider_message_id text,
  attempt_count int not null default 0,
  sent_at timestamptz,
  delivered_at timestamptz,
  last_error text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index emails_project_idx on emails (project_id, id desc);
create index emails_project_status_idx on emails (project_id, status, id desc);
create unique index emails_provider_message_id_idx on emails (provider_message_id) where provider_message_id is not null;

create table idempotency_keys (
  project_id text not null references projects(id) on delete cascade,
  idempotency_key text not null,
  fingerprint bytea not null,
  email_id text not null references emails(id) on delete cascade,
  created_at timestamptz not null default now(),
  primary key (project_id, idempotency_key)
);

create table provider_connections (
  project_id text primary key references projects(id) on delete cascade,
  provider text not null default 'ses' check (provider = 'ses'),
  region text not null,
  access_key_id text not null,
  secret_access_key_encrypted bytea not null,
  configuration_set text,
  events_queue_url text,
  sns_topic_arn text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index provider_connections_topic_idx on provider_connections (sns_topic_arn) where sns_topic_arn is not null;

create table domains (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  value text not null,
  region text not null,
  verification_status text not null default 'pending'
    check (verification_status in ('pending', 'success', 'failed', 'temporary_failure', 'not_started')),
  dkim_status text check (dkim_status in ('pending', 'success', 'failed', 'temporary_failure', 'not_started')),
  mail_from_status text check (mail_from_status in ('pending', 'success', 'failed', 'temporary_failure', 'not_started')),
  mail_from_domain text,
  dkim_tokens text[] not null default '{}',
  status_history jsonb not null default '[]',
  status_changed_at timestamptz,
  last_checked_at timestamptz,
  created_at timestamptz not null default now(),
  unique (project_id, value)
);

create table webhook_endpoints (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  url text not null,
  secret_encrypted bytea not null,
  status text not null default 'active' check (status in ('active', 'disabled_by_user', 'disabled_after_failures')),
  consecutive_failures int not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index webhook_endpoints_project_idx on webhook_endpoints (project_id, id);

create table events (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  email_id text not null references emails(id) on delete cascade,
  type text not null check (type in ('email.sent', 'email.delivered', 'email.delivery_delayed',
    'email.bounced', 'email.complained', 'email.failed')),
  data jsonb not null default '{}',
  -- Provider notifications can arrive more than once; this makes the second a no-op.
  dedupe_key text,
  created_at timestamptz not null default now()
);
create index events_email_idx on events (project_id, email_id, id);
create unique index events_dedupe_idx on events (project_id, dedupe_key) where dedupe_key is not null;

create table webhook_deliveries (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  endpoint_id text not null references webhook_endpoints(id) on delete cascade,
  event_id text not null references events(id) on delete cascade,
  status text not null default 'pending' check (status in ('pending', 'delivered', 'failed')),
  attempt_count int not null default 0,
  last_attempt_at timestamptz,
  next_attempt_at timestamptz default now(),
  response_status int,
  response_body text,
  error text,
  created_at timestamptz not null default now(),
  unique (endpoint_id, event_id)
);
create index webhook_deliveries_endpoint_idx on webhook_deliveries (project_id, endpoint_id, id desc);
create index webhook_deliveries_pending_idx on webhook_deliveries (next_attempt_at) where status = 'pending';

create table suppressions (
  project_id text not null references projects(id) on delete cascade,
  address text not null,
  reason text not null check (reason in ('bounced', 'complained', 'unsubscribed', 'manual')),
  email_id text,
  created_at timestamptz not null default now(),
  primary key (project_id, address)
);

create table sink_messages (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  email_id text,
  from_address text not null default '',
  to_addresses text[] not null default '{}',
  cc_addresses text[] not null default '{}',
  subject text not null default '',
  text text,
  html text,
  headers jsonb not null default '{}',
  attachments jsonb not null default '[]',
  raw bytea not null,
  size_bytes int not null,
  received_at timestamptz not null default now()
);
create index sink_messages_project_idx on sink_messages (project_id, id desc);

-- SNS retries a notification until it is acknowledged; the MessageId makes handling idempotent.
create table sns_messages (
  message_id text primary key,
  received_at timestamptz not null default now()
);

-- Liveness of worker pools, so jobs locked by a pool that died without shutting down are
-- released in seconds rather than graphile-worker's four-hour stale-lock sweep.
create table worker_heartbeats (
  pool_id text primary key,
  hostname text not null,
  pid int not null,
  started_at timestamptz not null default now(),
  last_seen_at timestamptz not null default now()
);
