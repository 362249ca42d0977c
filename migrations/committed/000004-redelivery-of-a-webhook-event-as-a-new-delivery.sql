--! Previous: sha1:810128b1522f5dc191ac7877b07039dd3e80c213
--! Hash: sha1:266188676e0383808443615e186cbb418033122f
--! Message: Redelivery of a webhook event as a new delivery

-- Redelivery: the same event may go to an endpoint again as a new delivery, which names the one
-- it repeats. Only the first delivery of an event to an endpoint stays unique.
alter table webhook_deliveries add column if not exists redelivery_of text references webhook_deliveries(id) on delete set null;
alter table webhook_deliveries drop constraint if exists webhook_deliveries_endpoint_id_event_id_key;
create unique index if not exists webhook_deliveries_first_idx on webhook_deliveries (endpoint_id, event_id) where redelivery_of is null;
