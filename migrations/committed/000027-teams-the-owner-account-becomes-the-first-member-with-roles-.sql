--! Previous: sha1:c6875adb518c04322ddd462f86f03d74fff84c0c
--! Hash: sha1:e4e3f35b6cb8b840ff3cc6f808a322bf23551a0a
--! Message: Teams: the owner account becomes the first member, with roles, member sessions and one-time invitations

-- Teams (§21.1–2): the instance's single owner account becomes the first member of a team, each
-- member with one role. Sessions belong to members; invitations are one-time links.
alter table if exists owner_accounts rename to members;
drop index if exists owner_accounts_singleton;
alter index if exists owner_accounts_pkey rename to members_pkey;
alter index if exists owner_accounts_email_key rename to members_email_key;
alter table members add column if not exists role text not null default 'owner'
  check (role in ('owner', 'admin', 'developer', 'viewer'));
alter table members alter column role drop default;
-- Members who only ever sign in with single sign-on have no password.
alter table members alter column password_hash drop not null;
alter table members add column if not exists last_sign_in_at timestamptz;

do $$ begin
  if exists (select 1 from information_schema.columns where table_name = 'dashboard_sessions' and column_name = 'owner_id') then
    alter table dashboard_sessions rename column owner_id to member_id;
    alter table dashboard_sessions rename constraint dashboard_sessions_owner_id_fkey to dashboard_sessions_member_id_fkey;
  end if;
end $$;
create index if not exists dashboard_sessions_member_id on dashboard_sessions (member_id);

create table if not exists member_invitations (
  id text primary key,
  email text not null,
  role text not null check (role in ('owner', 'admin', 'developer', 'viewer')),
  -- SHA-256 of the link's token; the token itself is shown once and never stored.
  token_hash bytea not null unique,
  invited_by text references members(id) on delete set null,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  accepted_at timestamptz,
  accepted_by text references members(id) on delete set null
);
-- At most one open invitation per address: a new one replaces it.
create unique index if not exists member_invitations_open_email on member_invitations (email) where accepted_at is null;
