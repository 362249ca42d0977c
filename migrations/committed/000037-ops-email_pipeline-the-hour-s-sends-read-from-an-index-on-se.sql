--! Previous: sha1:601cf088cebf311c12a789abd2300e6bcc525fb6
--! Hash: sha1:ee240be1a27bb0d38483105dcdf3035912bb66a7
--! Message: ops.email_pipeline: the hour's sends read from an index on sent_at

-- ops.email_pipeline's sent_last_5m and sent_last_60m: the hour's sends of every project read from
-- one range of an index on sent_at. The index led by project_id, which nothing else reads, left the
-- view reading every email made in the last four hours (3,300 of them for 700 sent, at a million
-- emails over 48 days). Cost on an existing database: about 1.5 s per million emails (2 shared
-- cores); the build locks writes to emails while it runs, so on a large database create the index
-- first with CREATE INDEX CONCURRENTLY on each day partition and the parent under this name.
create index if not exists emails_sent_at_idx on emails (sent_at) include (project_id) where sent_at is not null;
drop index if exists emails_project_sent_at_idx;
