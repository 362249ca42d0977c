--! Previous: sha1:a35da38c8a5683e73fafea289018002298c47d1d
--! Hash: sha1:d827e932c32160c7ccc25f24bb5e3e84a56f96bc
--! Message: Email tags

-- Tags: up to ten name/value pairs per email, carried in its events and filterable.
alter table emails add column if not exists tags jsonb not null default '[]';
create index if not exists emails_tags_idx on emails using gin (tags jsonb_path_ops);
