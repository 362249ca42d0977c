--! Previous: sha1:fa67be45e594899d4b91088880d49fdf05d3e06d
--! Hash: sha1:c6875adb518c04322ddd462f86f03d74fff84c0c
--! Message: Inbound email: received_emails, the received events' partition, email.received, and each domain's receiving set-up

-- Inbound email (CONTRACT §20): received emails, their events, and each domain's receiving rule.

-- One row per SES mail.messageId and project. The bytes of an S3-delivered message stay in the
-- customer's bucket (s3_bucket, s3_key) and are fetched again for a download; a message that
-- came inline (an SNS action's `content`, or POST /v1/sink/inbound) keeps them in `raw`.
create table if not exists received_emails (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  ses_message_id text not null,
  from_address text not null default '',
  to_addresses text[] not null default '{}',
  cc_addresses text[] not null default '{}',
  reply_to_addresses text[] not null default '{}',
  received_for text[] not null default '{}',
  subject text not null default '',
  message_id_header text,
  in_reply_to text,
  "references" text[] not null default '{}',
  html text,
  text text,
  stripped_text text,
  headers jsonb not null default '{}',
  attachments jsonb not null default '[]',
  raw bytea,
  s3_bucket text,
  s3_key text,
  raw_size bigint,
  verdicts jsonb not null default '{}',
  is_auto_reply boolean not null default false,
  is_bounce boolean not null default false,
  in_reply_to_email_id text,
  thread_id text not null,
  content_too_large boolean not null default false,
  body_purged boolean not null default false,
  created_at timestamptz not null default now(),
  unique (project_id, ses_message_id)
);
create index if not exists received_emails_project_idx on received_emails (project_id, id desc);
create index if not exists received_emails_message_id_idx on received_emails (project_id, message_id_header) where message_id_header is not null;
create index if not exists received_emails_reply_to_idx on received_emails (project_id, in_reply_to_email_id) where in_reply_to_email_id is not null;
create index if not exists received_emails_created_idx on received_emails (created_at);
-- Threading looks a sent email up by the Message-ID Mailroom gave it.
create index if not exists emails_message_id_header_idx on emails (project_id, message_id_header) where message_id_header is not null;

-- The events of received emails (email.received) and their deliveries live in one partition of
-- their own: ids `rcv_…` sort after every `email_…` day, so the day partitions are untouched and
-- retention removes these rows with their received email.
do $$
begin
  if to_regclass('events_received') is null then
    execute $q$create table events_received partition of events for values from ('rcv_') to ('rcv`')$q$;
  end if;
  if to_regclass('webhook_deliveries_received') is null then
    execute $q$create table webhook_deliveries_received partition of webhook_deliveries for values from ('rcv_') to ('rcv`')$q$;
  end if;
end $$;

alter table events drop constraint if exists events_type_check;
alter table events add constraint events_type_check check (type in ('email.sent', 'email.delivered',
  'email.delivery_delayed', 'email.bounced', 'email.complained', 'email.failed', 'email.opened',
  'email.clicked', 'email.received'));

-- A domain's receiving set-up (§20.1): null when off.
alter table domains add column if not exists receiving jsonb;
