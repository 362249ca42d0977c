--! Previous: sha1:a0674f48991ec0a4816ef013f9eae471d4be71ad
--! Hash: sha1:02f15b5522ec44d59e4343ea41f5b7babf5c9881
--! Message: Sink prune by position: per-project tallies, each message's seq and bytes before it

-- The sink prunes by position instead of by walking every kept message. Each project keeps a
-- tally of the messages and raw bytes it has ever stored; each message records its place in that
-- order (seq) and the bytes stored before it. The newest N messages are those with
-- seq > tally.messages - N, and the newest that fit in B bytes are those with
-- bytes_before >= tally.bytes - B, so a prune is two index range lookups, whatever the number kept.
create table if not exists sink_tallies (
  project_id text primary key references projects(id) on delete cascade,
  messages bigint not null,
  bytes bigint not null
);

alter table sink_messages add column if not exists seq bigint;
alter table sink_messages add column if not exists bytes_before bigint;

-- Messages already stored take their places in id order, the order the prune used before.
with placed as (
  select id,
         row_number() over newest_last as seq,
         coalesce(sum(size_bytes) over newest_last, 0) - size_bytes as bytes_before
  from sink_messages
  window newest_last as (partition by project_id order by id)
)
update sink_messages m set seq = placed.seq, bytes_before = placed.bytes_before
from placed where placed.id = m.id and m.seq is null;

insert into sink_tallies (project_id, messages, bytes)
select project_id, max(seq), max(bytes_before + size_bytes) from sink_messages group by project_id
on conflict (project_id) do nothing;

alter table sink_messages alter column seq set not null, alter column bytes_before set not null;
create index if not exists sink_messages_project_seq_idx on sink_messages (project_id, seq);
create index if not exists sink_messages_project_bytes_idx on sink_messages (project_id, bytes_before, seq);
