--! Previous: sha1:c7a2bbbc37e542044a5286fea7613176bd216c61
--! Hash: sha1:9cc9d9ea41aeb0fdde10bac117a1710c6a3b68ff
--! Message: Unsent emails by creation time, for retention

-- Unsent emails by creation time (CONTRACT §18.5): retention fails those still unsent after
-- RETENTION_DAYS, and a day is removed only when it holds none. Small: only scheduled, queued
-- and sending rows are in it.
create index if not exists emails_unsent_idx on emails (created_at) where status in ('scheduled', 'queued', 'sending');
