--! Previous: sha1:02f15b5522ec44d59e4343ea41f5b7babf5c9881
--! Hash: sha1:2ee5daecbc4c28f1f0aee50916fffd4837b09926
--! Message: webhook deliveries leased by a flush

-- A webhook flush takes an endpoint's deliveries that have not been attempted yet, a batch at a
-- time, and holds them for a while so a second flush of the same endpoint never posts them too.
alter table webhook_deliveries add column if not exists leased_until timestamptz;
create index if not exists webhook_deliveries_unattempted_idx
  on webhook_deliveries (endpoint_id, id) where status = 'pending' and attempt_count = 0;
