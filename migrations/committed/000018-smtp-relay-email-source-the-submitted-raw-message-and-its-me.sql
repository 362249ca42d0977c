--! Previous: sha1:221c611efe47f959f9c531347a670d10c03eb0b3
--! Hash: sha1:00f8240f69093191f9aa24ec8ca12fd661bd5027
--! Message: SMTP relay: email source, the submitted raw message and its Message-ID for the retry dedupe

-- SMTP submission relay (§13): where an email came from, the message as it was submitted, and
-- its Message-ID for the 24-hour retry dedupe.
alter table emails add column if not exists source text not null default 'api';
alter table emails drop constraint if exists emails_source_check;
alter table emails add constraint emails_source_check check (source in ('api', 'smtp'));
-- The submitted RFC 5322 message, sent as it is (with the few header edits of §13.2) instead of
-- being composed from the columns; null for API mail. Body retention purges it with html/text.
alter table emails add column if not exists raw_message bytea;
-- The client's own Message-ID while a repeat of it must answer the first email (24 h); cleared
-- when a later submission finds it older, so the unique index only ever holds live ones.
alter table emails add column if not exists submitted_message_id text;
create unique index if not exists emails_submitted_message_id_idx
  on emails (project_id, submitted_message_id) where submitted_message_id is not null;
