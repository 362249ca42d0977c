-- Unsent emails by creation time (CONTRACT §18.5): retention fails those still unsent after
-- RETENTION_DAYS, and a day is removed only when it holds none. Small: only scheduled, queued
-- and sending rows are in it.
create index if not exists emails_unsent_idx on emails (created_at) where status in ('scheduled', 'queued', 'sending');
