--! Previous: sha1:45d8128b7a29a72ed84687519aac08413b8dd273
--! Hash: sha1:8f35a31af2adec044f8e2ade1f6c564eb9961f83
--! Message: Indexes for the dashboard's overview chart, email page and sink link

-- The dashboard's reads: a project's events by day (the overview chart), the webhook deliveries
-- of one email's events (the email page), and the caught copy of an email (the sink link).
create index if not exists events_project_created_idx on events (project_id, created_at);
create index if not exists webhook_deliveries_event_idx on webhook_deliveries (event_id);
create index if not exists sink_messages_email_idx on sink_messages (project_id, email_id) where email_id is not null;
