--! Previous: sha1:563180d16b25fd35b5276a0a07eeafa4125b7c65
--! Hash: sha1:973079683640956431092f669a5026880b913316
--! Message: Sink prune: each prune deletes from where the last one stopped (sink_tallies.pruned_through)

-- A prune deletes from where the last one stopped. Deleted rows stay in sink_messages' index
-- until a vacuum, and a delete of `seq <= N` walked every one of them each time: at 8,100 such
-- rows behind 5,000 kept, 6-9 ms a prune against 0.1 ms for the same rows from a lower bound, on
-- the one path every caught message takes. Rows deleted by other means (a cleared inbox, a
-- deleted message) are below or beside the bound and need no prune.
alter table sink_tallies add column if not exists pruned_through bigint not null default 0;

create or replace function sink_prune(project text, keep_messages bigint, keep_bytes bigint) returns void
language plpgsql as $$
declare
  total_messages bigint;
  total_bytes bigint;
  pruned bigint;
  fits_from bigint;
  last_dropped bigint;
begin
  select messages, bytes, pruned_through into total_messages, total_bytes, pruned from sink_tallies where project_id = project;
  if not found then
    return;
  end if;
  last_dropped := total_messages - keep_messages;
  if total_bytes > keep_bytes then
    execute 'select seq from sink_messages where project_id = $1 and bytes_before < $2
             order by bytes_before desc, seq desc limit 1'
      into fits_from using project, total_bytes - keep_bytes;
    last_dropped := greatest(last_dropped, fits_from);
  end if;
  -- The newest message always stays.
  last_dropped := least(last_dropped, total_messages - 1);
  if last_dropped > pruned then
    -- Every message up to `pruned` went with a prune that committed: the tally's lock orders
    -- the inserts, so no message at or below a committed tally arrives later.
    execute 'delete from sink_messages where project_id = $1 and seq > $2 and seq <= $3' using project, pruned, last_dropped;
    update sink_tallies set pruned_through = greatest(pruned_through, last_dropped) where project_id = project;
  end if;
end
$$;
