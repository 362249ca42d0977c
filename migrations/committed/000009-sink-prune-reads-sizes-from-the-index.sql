--! Previous: sha1:d827e932c32160c7ccc25f24bb5e3e84a56f96bc
--! Hash: sha1:45d8128b7a29a72ed84687519aac08413b8dd273
--! Message: Sink prune reads sizes from the index

-- The sink's prune reads sizes newest first from the index alone, never the wide rows.
drop index if exists sink_messages_project_idx;
create index if not exists sink_messages_project_size_idx on sink_messages (project_id, id desc) include (size_bytes);
