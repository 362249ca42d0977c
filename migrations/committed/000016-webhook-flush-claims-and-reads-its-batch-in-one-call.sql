--! Previous: sha1:6065e3db9246b6d4a605204bc1c9c43b88434f70
--! Hash: sha1:a602c2b8342d73320c645645f4ca29db5431a417
--! Message: webhook flush claims and reads its batch in one call

-- A webhook flush claims a batch of an endpoint's unattempted deliveries and reads them with their
-- endpoint and event in one call, one round trip. The statement is planned for the values of each
-- call (EXECUTE keeps no plan): a plan kept from when the tables were small would scan every
-- delivery and every event of the project. Rows whose endpoint or event is gone come back with
-- nulls there: the caller counts them as claimed and attempts nothing for them.
create or replace function webhook_flush_claim(endpoint text, project text, lease_seconds int, how_many int)
returns table (
  id text, project_id text, endpoint_id text, status text, attempt_count int,
  url text, endpoint_status text, secret_encrypted bytea,
  event_id text, type text, email_id text, data jsonb, event_created_at timestamptz)
language plpgsql as $$
begin
  -- The update finds its rows through = any(array(...)), which only the primary key can serve.
  return query execute '
    with claimed as (
      update webhook_deliveries set leased_until = now() + make_interval(secs => $3)
      where id = any(array(
        select id from webhook_deliveries
        where endpoint_id = $1 and project_id = $2 and status = ''pending'' and attempt_count = 0
          and (leased_until is null or leased_until <= now())
        order by endpoint_id, id limit $4
        for update skip locked))
      returning id, project_id, endpoint_id, status, attempt_count, event_id)
    select c.id, c.project_id, c.endpoint_id, c.status, c.attempt_count,
           w.url, w.status, w.secret_encrypted,
           e.id, e.type, e.email_id, e.data, e.created_at
    from claimed c
    left join webhook_endpoints w on w.id = c.endpoint_id and w.project_id = c.project_id
    left join events e on e.id = c.event_id and e.project_id = c.project_id
    order by c.id'
  using endpoint, project, lease_seconds, how_many;
end
$$;
