--! Previous: sha1:2ee5daecbc4c28f1f0aee50916fffd4837b09926
--! Hash: sha1:15c76d0f7ed914d02c0ebc607b0746a6a3185c7f
--! Message: sink prune planned per call inside a function

-- The sink's prune, as a function whose statement is planned for the values of each call
-- (EXECUTE keeps no plan). Called as a prepared statement, it goes out pipelined behind the
-- insert it follows, where an unprepared statement with parameters costs a round trip of its own
-- to describe them first.
create or replace function sink_prune(project text, keep_messages bigint, keep_bytes bigint) returns void
language plpgsql as $$
begin
  execute $prune$
    with tally as (select messages, bytes from sink_tallies where project_id = $1),
    last_dropped as (
      select least(
        (select messages - 1 from tally),
        greatest(
          (select messages - $2 from tally),
          (select seq from sink_messages
           where project_id = $1 and bytes_before < (select bytes - $3 from tally)
           order by bytes_before desc, seq desc limit 1))) as seq)
    delete from sink_messages
    where project_id = $1 and seq <= (select seq from last_dropped)
  $prune$ using project, keep_messages, keep_bytes;
end
$$;
