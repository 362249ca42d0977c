--! Previous: sha1:4411a8f5408dfd1e9d254ebfb5eb4429121ab1a6
--! Hash: sha1:cb7c71c4f74af961499eadb6940e851b9846273e
--! Message: Scheduled sends

-- Scheduled sends: an email may wait as `scheduled` until `scheduled_at`, or be `canceled`.
alter table emails add column if not exists scheduled_at timestamptz;
alter table emails drop constraint if exists emails_status_check;
alter table emails add constraint emails_status_check
  check (status in ('scheduled', 'queued', 'sending', 'sent', 'failed', 'canceled'));
