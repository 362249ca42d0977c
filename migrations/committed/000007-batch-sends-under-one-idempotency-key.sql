--! Previous: sha1:cb7c71c4f74af961499eadb6940e851b9846273e
--! Hash: sha1:a35da38c8a5683e73fafea289018002298c47d1d
--! Message: Batch sends under one idempotency key

-- Batch sends: one Idempotency-Key may stand for all the emails of a batch.
alter table idempotency_keys add column if not exists email_ids text[];
