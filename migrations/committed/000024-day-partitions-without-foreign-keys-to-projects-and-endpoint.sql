--! Previous: sha1:94323525b676cc337519093a2c4a221a9876c2c8
--! Hash: sha1:a226687b850ca31cc7e280a5e0e043b93681c560
--! Message: Day partitions without foreign keys to projects and endpoints; deleting either by hand takes its rows through statement triggers

-- The day partitions carry no foreign keys to projects and webhook_endpoints. Dropping a day's
-- detached table removes its foreign keys' triggers from the referenced table, which takes an
-- ACCESS EXCLUSIVE lock on `projects` (and `webhook_endpoints`): the drop waited behind any
-- transaction that had read a project, and every send then queued behind the drop (accept's p99
-- doubled while a month of days went). Every row's project comes from its authenticated caller;
-- deleting a project or an endpoint (by hand: Mailroom disables endpoints and keeps projects)
-- still takes its rows along, through the statement triggers below, which live on the referenced
-- tables and never change with the partitions.
alter table emails drop constraint if exists emails_project_id_fkey;
alter table events drop constraint if exists events_project_id_fkey;
alter table email_tags drop constraint if exists email_tags_project_id_fkey;
alter table webhook_deliveries drop constraint if exists webhook_deliveries_project_id_fkey;
alter table webhook_deliveries drop constraint if exists webhook_deliveries_endpoint_id_fkey;

create or replace function mailroom_delete_project_rows() returns trigger
language plpgsql as $$
begin
  delete from webhook_deliveries where project_id in (select id from gone);
  delete from events where project_id in (select id from gone);
  delete from email_tags where project_id in (select id from gone);
  delete from emails where project_id in (select id from gone);
  return null;
end $$;
drop trigger if exists projects_delete_rows on projects;
create trigger projects_delete_rows after delete on projects
  referencing old table as gone for each statement execute function mailroom_delete_project_rows();

create or replace function mailroom_delete_endpoint_deliveries() returns trigger
language plpgsql as $$
begin
  delete from webhook_deliveries where endpoint_id in (select id from gone);
  return null;
end $$;
drop trigger if exists webhook_endpoints_delete_deliveries on webhook_endpoints;
create trigger webhook_endpoints_delete_deliveries after delete on webhook_endpoints
  referencing old table as gone for each statement execute function mailroom_delete_endpoint_deliveries();
