--! Previous: sha1:15c76d0f7ed914d02c0ebc607b0746a6a3185c7f
--! Hash: sha1:6065e3db9246b6d4a605204bc1c9c43b88434f70
--! Message: sink prune plans its delete only when there is something to drop

-- The prune in steps: the tally and the byte budget decide where the kept messages begin, and
-- only a prune with something before that point plans and runs its delete. Each statement that
-- reads sink_messages is planned for the values of its call (EXECUTE keeps no plan): a plan kept
-- from when the sink was small would scan it whole.
create or replace function sink_prune(project text, keep_messages bigint, keep_bytes bigint) returns void
language plpgsql as $$
declare
  total_messages bigint;
  total_bytes bigint;
  fits_from bigint;
  last_dropped bigint;
begin
  select messages, bytes into total_messages, total_bytes from sink_tallies where project_id = project;
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
  if last_dropped > 0 then
    execute 'delete from sink_messages where project_id = $1 and seq <= $2' using project, last_dropped;
  end if;
end
$$;
