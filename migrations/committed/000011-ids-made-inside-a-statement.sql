--! Previous: sha1:8f35a31af2adec044f8e2ade1f6c564eb9961f83
--! Hash: sha1:a0674f48991ec0a4816ef013f9eae471d4be71ad
--! Message: Ids made inside a statement

-- Ids made inside a statement, for rows whose number only the statement knows (one webhook
-- delivery per active endpoint). The same shape as the application's: prefix + a 26-character
-- ULID, 48 bits of milliseconds then random bits, in Crockford base32, so they sort by creation
-- time beside ids made in Node.
create or replace function mailroom_new_id(prefix text) returns text
language plpgsql volatile as $$
declare
  alphabet constant text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  ms bigint := floor(extract(epoch from clock_timestamp()) * 1000)::bigint;
  r bytea := uuid_send(gen_random_uuid());
  hi bigint := 0;
  lo bigint := 0;
  body text := '';
  i int;
begin
  for i in reverse 9..0 loop
    body := body || substr(alphabet, ((ms >> (i * 5)) & 31)::int + 1, 1);
  end loop;
  -- Two 40-bit halves from the UUID's bytes (a v4 UUID fixes 6 of these 80 bits; 74 stay random).
  for i in 0..4 loop
    hi := (hi << 8) | get_byte(r, i);
    lo := (lo << 8) | get_byte(r, i + 5);
  end loop;
  for i in reverse 7..0 loop
    body := body || substr(alphabet, ((hi >> (i * 5)) & 31)::int + 1, 1);
  end loop;
  for i in reverse 7..0 loop
    body := body || substr(alphabet, ((lo >> (i * 5)) & 31)::int + 1, 1);
  end loop;
  return prefix || body;
end
$$;
