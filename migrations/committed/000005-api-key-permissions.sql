--! Previous: sha1:266188676e0383808443615e186cbb418033122f
--! Hash: sha1:4411a8f5408dfd1e9d254ebfb5eb4429121ab1a6
--! Message: API key permissions

-- Key permissions: `full`, or `sending` (send, batch, reschedule and cancel only).
alter table api_keys add column if not exists permission text not null default 'full' check (permission in ('full', 'sending'));
