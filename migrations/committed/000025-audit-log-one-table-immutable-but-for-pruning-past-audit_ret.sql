--! Previous: sha1:a226687b850ca31cc7e280a5e0e043b93681c560
--! Hash: sha1:fa67be45e594899d4b91088880d49fdf05d3e06d
--! Message: Audit log: one table, immutable but for pruning past AUDIT_RETENTION_DAYS

-- The audit log (CONTRACT §21.4): one row per change made through the dashboard, the API or the
-- CLI, written by recordAudit (src/audit/record.ts) in the transaction of the change. Entries
-- outlive what they name, so there is no foreign key to projects or to the targets.
create table if not exists audit_log (
  id text primary key,
  at timestamptz not null default now(),
  actor_type text not null check (actor_type in ('member', 'api_key', 'cli', 'system')),
  actor_id text,
  actor_label text,
  action text not null check (action ~ '^[a-z_]+\.[a-z_]+$'),
  project_id text,
  target_type text not null,
  target_id text,
  ip text,
  changes jsonb
);
-- Reads are a project's entries newest first (the API), or everyone's (the dashboard, the CLI).
create index if not exists audit_log_project_idx on audit_log (project_id, id desc);
create index if not exists audit_log_at_idx on audit_log (at);

-- Entries are never edited, and deleted only by the pruning of AUDIT_RETENTION_DAYS, which says so
-- for its own transaction (src/audit/prune.ts). No route or command can do either.
create or replace function audit_log_immutable() returns trigger language plpgsql as $$
begin
  if tg_op = 'DELETE' and current_setting('mailroom.audit_prune', true) = 'on' then
    return old;
  end if;
  raise exception 'audit log entries are never edited or deleted' using errcode = 'insufficient_privilege';
end $$;
drop trigger if exists audit_log_immutable on audit_log;
create trigger audit_log_immutable before update or delete on audit_log
  for each row execute function audit_log_immutable();
drop trigger if exists audit_log_no_truncate on audit_log;
create trigger audit_log_no_truncate before truncate on audit_log
  for each statement execute function audit_log_immutable();
