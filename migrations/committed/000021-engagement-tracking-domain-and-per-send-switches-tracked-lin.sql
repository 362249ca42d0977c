--! Previous: sha1:0fd269a8800b9f904625dee10d9562287b5ea84f
--! Hash: sha1:17784bba84b9cc94e02214b369fc877baf02f5ec
--! Message: Engagement tracking: domain and per-send switches, tracked links, first open and click, two event types, webhook event filters

-- Engagement tracking (opens and clicks) and webhook event filters.

-- Per domain, off by default. The send task reads them with the email it claims, so there is
-- nothing to cache and nothing goes stale.
alter table domains add column if not exists open_tracking boolean not null default false;
alter table domains add column if not exists click_tracking boolean not null default false;
alter table domains add column if not exists tracking_domain text;

-- A send's own switches (null: the domain decides), the original URLs of the links rewritten at
-- send time (by position), and the first open and click.
alter table emails add column if not exists track_opens boolean;
alter table emails add column if not exists track_clicks boolean;
alter table emails add column if not exists tracked_links text[];
alter table emails add column if not exists opened_at timestamptz;
alter table emails add column if not exists clicked_at timestamptz;

-- Two more event types. NOT VALID: every existing row is one of the six already, so the new
-- check applies to new rows without reading (and locking for a scan) the whole events table.
alter table events drop constraint if exists events_type_check;
alter table events add constraint events_type_check check (type in ('email.sent', 'email.delivered',
  'email.delivery_delayed', 'email.bounced', 'email.complained', 'email.failed', 'email.opened', 'email.clicked')) not valid;

-- Null: every type.
alter table webhook_endpoints add column if not exists event_types text[];
