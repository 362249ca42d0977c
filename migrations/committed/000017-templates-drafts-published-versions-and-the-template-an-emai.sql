--! Previous: sha1:a602c2b8342d73320c645645f4ca29db5431a417
--! Hash: sha1:221c611efe47f959f9c531347a670d10c03eb0b3
--! Message: Templates: drafts, published versions, and the template an email was rendered from

-- Templates (CONTRACT §14): a template row holds the editable draft; each publish copies the
-- draft into template_versions, whose rows never change, so sends and caches key on their ids.
create table if not exists templates (
  id text primary key,
  project_id text not null references projects(id) on delete cascade,
  name text not null,
  alias text,
  subject text,
  html text not null,
  text text,
  from_address text,
  reply_to_addresses text[] not null default '{}',
  variables jsonb not null default '[]',
  -- The draft's version number and the id its version row takes when published.
  current_version integer not null default 1,
  draft_version_id text not null,
  published_version_id text,
  published_at timestamptz,
  has_unpublished_versions boolean not null default false,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create unique index if not exists templates_alias_per_project on templates (project_id, alias) where alias is not null;
create index if not exists templates_by_project on templates (project_id, id);

create table if not exists template_versions (
  id text primary key,
  template_id text not null references templates(id) on delete cascade,
  project_id text not null references projects(id) on delete cascade,
  version integer not null,
  subject text,
  html text not null,
  text text,
  from_address text,
  reply_to_addresses text[] not null default '{}',
  variables jsonb not null default '[]',
  published_at timestamptz not null default now(),
  unique (template_id, version)
);

-- What a templated email was rendered from. No foreign key: a deleted template leaves its
-- emails as they were sent.
alter table emails add column if not exists template_id text;
alter table emails add column if not exists template_version integer;
