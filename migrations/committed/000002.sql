--! Previous: sha1:ba021055c4b0303f69b587015a6e7d894752f49f
--! Hash: sha1:e96fc083a0d4b1af271b731783feab56c98ee894

-- Enter migration here

-- dashboard: one owner per instance, and sessions keyed by a hash of the cookie's token.
-- A unique index on a constant lets at most one owner row exist, so two simultaneous signups
-- can't both claim the instance.
create unique index if not exists owner_accounts_singleton on owner_accounts ((true));

create table if not exists dashboard_sessions (
  id text primary key, -- SHA-256 hex of the cookie's token; the token itself is never stored
  owner_id text not null references owner_accounts(id) on delete cascade,
  csrf_secret text not null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null
);
create index if not exists dashboard_sessions_expires_at on dashboard_sessions (expires_at);
