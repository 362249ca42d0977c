--! Previous: sha1:e96fc083a0d4b1af271b731783feab56c98ee894
--! Hash: sha1:810128b1522f5dc191ac7877b07039dd3e80c213
--! Message: Pacing to the SES account and one send at a time per email

-- Pacing to the SES account: the account's quota, an operator cap, the next free send slot
-- shared by every worker, and a minute of half pace after SES throttles.
alter table provider_connections
  add column if not exists max_send_rate double precision check (max_send_rate > 0),
  add column if not exists max_24_hour_send double precision check (max_24_hour_send >= 0),
  add column if not exists rate_cap double precision check (rate_cap > 0),
  add column if not exists quota_checked_at timestamptz,
  add column if not exists next_send_slot timestamptz not null default now(),
  add column if not exists slowed_until timestamptz;

create table if not exists provider_throttles (
  project_id text not null references projects(id) on delete cascade,
  throttled_at timestamptz not null default now()
);
create index if not exists provider_throttles_project_idx on provider_throttles (project_id, throttled_at);

-- One send at a time per email: the claim takes a lease naming the worker pool that holds it.
alter table emails
  add column if not exists lease_owner text,
  add column if not exists lease_expires_at timestamptz;
create index if not exists emails_project_sent_at_idx on emails (project_id, sent_at) where sent_at is not null;
