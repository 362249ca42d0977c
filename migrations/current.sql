-- Enter migration here

-- Broadcast retention and outcome reads (CONTRACT §23.3, §18 retention).
-- A finished broadcast's counts, kept on its row once retention is about to remove its emails;
-- null while they are read live from its emails and recipients.
alter table broadcasts add column if not exists counts_kept jsonb;
-- The two outcomes a broadcast's recipients list asks the events for, so few bounces in a large
-- broadcast are found by this index instead of by walking every recipient.
create index if not exists events_bounced_complained on events (project_id, type, email_id)
  where type in ('email.bounced', 'email.complained');
-- Unsubscribed contacts, so the `unsubscribed` recipients walk only them.
create index if not exists contacts_unsubscribed on contacts (project_id, id) where unsubscribed;
