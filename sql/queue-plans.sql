-- graphile_worker.add_jobs runs an UPDATE over the jobs table looking for keyed jobs to replace.
-- PL/pgSQL keeps the plan it made on a connection's first call for as long as the connection
-- lives; made while the table was nearly empty, that plan is a sequential scan, and every later
-- batch then reads the whole backlog (measured: PostgreSQL CPU per accepted email grew from
-- 0.2 ms to 1.3 ms over 2 minutes and 145k queued jobs while nothing analysed the table).
-- Planning each call for the table as it is now picks the key index. Re-applied after every
-- migration run, so a graphile-worker upgrade that replaces the function keeps it.
alter function graphile_worker.add_jobs(graphile_worker.job_spec[], boolean)
  set plan_cache_mode = force_custom_plan;
