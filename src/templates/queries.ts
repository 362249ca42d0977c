import type { Sql, TxSql } from '../platform/db.ts';
import type { TemplateVariable } from './engine.ts';

/** The parts a template and each of its versions hold. */
export type TemplateContent = {
  subject: string | null;
  html: string;
  text: string | null;
  fromAddress: string | null;
  replyToAddresses: string[];
  variables: TemplateVariable[];
};

export type TemplateRow = TemplateContent & {
  id: string;
  projectId: string;
  name: string;
  alias: string | null;
  currentVersion: number;
  draftVersionId: string;
  publishedVersionId: string | null;
  publishedAt: Date | null;
  hasUnpublishedVersions: boolean;
  createdAt: Date;
  updatedAt: Date;
};

export type VersionRow = TemplateContent & { id: string; templateId: string; version: number; publishedAt: Date };

const COLUMNS = (sql: Sql | TxSql) => sql`id, project_id, name, alias, subject, html, text, from_address, reply_to_addresses, variables,
  current_version, draft_version_id, published_version_id, published_at, has_unpublished_versions, created_at, updated_at`;

/** `tmpl_…` ids and aliases never look alike (aliases are lower case), so one column decides. */
const byIdOrAlias = (sql: Sql, projectId: string, idOrAlias: string) =>
  sql`project_id = ${projectId} and ${idOrAlias.startsWith('tmpl_') ? sql`id = ${idOrAlias}` : sql`alias = ${idOrAlias}`}`;

export async function insertTemplate(sql: Sql | TxSql, t: { id: string; projectId: string; name: string; alias: string | null; draftVersionId: string } & TemplateContent) {
  const [row] = await sql<[TemplateRow]>`
    insert into templates (id, project_id, name, alias, subject, html, text, from_address, reply_to_addresses, variables, draft_version_id)
    values (${t.id}, ${t.projectId}, ${t.name}, ${t.alias}, ${t.subject}, ${t.html}, ${t.text}, ${t.fromAddress},
            ${t.replyToAddresses}::text[], ${sql.json(t.variables)}, ${t.draftVersionId})
    returning ${COLUMNS(sql)}`;
  return row;
}

export async function getTemplate(sql: Sql, projectId: string, idOrAlias: string) {
  const [row] = await sql<[TemplateRow?]>`select ${COLUMNS(sql)} from templates where ${byIdOrAlias(sql, projectId, idOrAlias)}`;
  return row;
}

/** The project a template belongs to, for the operator CLI, which names only the template. */
export async function findTemplateProject(sql: Sql, templateId: string) {
  const [row] = await sql<[{ projectId: string }?]>`select project_id from templates where id = ${templateId}`;
  return row?.projectId;
}

/** Newest first; one extra row answers has_more. */
export async function listTemplates(sql: Sql, projectId: string, opts: { limit: number; startingAfter?: string; endingBefore?: string }) {
  const rows = opts.endingBefore
    ? (await sql<TemplateRow[]>`
        select ${COLUMNS(sql)} from templates where project_id = ${projectId} and id > ${opts.endingBefore}
        order by id asc limit ${opts.limit + 1}`).reverse()
    : await sql<TemplateRow[]>`
        select ${COLUMNS(sql)} from templates where project_id = ${projectId}
          ${opts.startingAfter ? sql`and id < ${opts.startingAfter}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const hasMore = rows.length > opts.limit;
  return { rows: opts.endingBefore ? rows.slice(Math.max(0, rows.length - opts.limit)) : rows.slice(0, opts.limit), hasMore };
}

/**
 * Writes the draft. The first edit after a publish starts the next version: a new number, and a
 * new id for the row it will become.
 */
export async function updateDraft(sql: Sql | TxSql, projectId: string, templateId: string, change: Partial<TemplateContent & { name: string; alias: string | null }>, newVersionId: string) {
  const set = (column: string, value: unknown) => (value === undefined ? sql`` : sql`, ${sql(column)} = ${value as string}`);
  const [row] = await sql<[TemplateRow?]>`
    update templates set updated_at = now(), has_unpublished_versions = true,
      current_version = case when published_version_id is not null and not has_unpublished_versions then current_version + 1 else current_version end,
      draft_version_id = case when published_version_id is not null and not has_unpublished_versions then ${newVersionId} else draft_version_id end
      ${set('name', change.name)} ${set('alias', change.alias)} ${set('subject', change.subject)} ${set('html', change.html)}
      ${set('text', change.text)} ${set('from_address', change.fromAddress)}
      ${change.replyToAddresses === undefined ? sql`` : sql`, reply_to_addresses = ${change.replyToAddresses}::text[]`}
      ${change.variables === undefined ? sql`` : sql`, variables = ${sql.json(change.variables)}`}
    where id = ${templateId} and project_id = ${projectId}
    returning ${COLUMNS(sql)}`;
  return row;
}

/**
 * Copies the draft into its version row and makes it the one sends use, in one statement. A
 * draft already published (no edits since) is left as it is.
 */
export async function publishDraft(sql: Sql | TxSql, projectId: string, templateId: string) {
  const [row] = await sql<[TemplateRow?]>`
    with draft as (
      select * from templates
      where id = ${templateId} and project_id = ${projectId}
        and (published_version_id is null or has_unpublished_versions)
      for update
    ), version as (
      insert into template_versions (id, template_id, project_id, version, subject, html, text, from_address, reply_to_addresses, variables)
      select draft_version_id, id, project_id, current_version, subject, html, text, from_address, reply_to_addresses, variables from draft
      returning id, published_at
    ), updated as (
      update templates t set published_version_id = v.id, published_at = v.published_at, has_unpublished_versions = false, updated_at = now()
      from version v
      where t.id = ${templateId} and t.project_id = ${projectId}
      returning t.*
    )
    select ${COLUMNS(sql)} from updated`;
  return row;
}

export async function listVersions(sql: Sql, projectId: string, templateId: string) {
  return sql<{ id: string; version: number; publishedAt: Date }[]>`
    select id, version, published_at from template_versions
    where template_id = ${templateId} and project_id = ${projectId}
    order by version desc`;
}

export async function getVersion(sql: Sql, projectId: string, templateId: string, version: number) {
  const [row] = await sql<[VersionRow?]>`
    select id, template_id, version, subject, html, text, from_address, reply_to_addresses, variables, published_at
    from template_versions where template_id = ${templateId} and project_id = ${projectId} and version = ${version}`;
  return row;
}

/** A version by its id: what the compile cache loads once per version. */
export async function getVersionById(sql: Sql, projectId: string, versionId: string) {
  const [row] = await sql<[VersionRow?]>`
    select id, template_id, version, subject, html, text, from_address, reply_to_addresses, variables, published_at
    from template_versions where id = ${versionId} and project_id = ${projectId}`;
  return row;
}

export type PublishedLookup = { projectId: string; idOrAlias: string };

/**
 * What a send looks up every time: which version of each template is published now, for many
 * sends in one statement. The content comes from the compile cache. Answers in the order asked.
 */
export async function findPublished(sql: Sql, lookups: PublishedLookup[]) {
  const asked = lookups.map((l, i) => ({ i, project_id: l.projectId, name: l.idOrAlias, by_id: l.idOrAlias.startsWith('tmpl_') }));
  const rows = await sql<{ i: number; id: string; publishedVersionId: string | null }[]>`
    with asked as (select * from jsonb_to_recordset(${sql.json(asked)}) as r(i int, project_id text, name text, by_id boolean))
    select a.i, t.id, t.published_version_id from asked a join templates t on t.id = a.name and t.project_id = a.project_id where a.by_id
    union all
    select a.i, t.id, t.published_version_id from asked a join templates t on t.alias = a.name and t.project_id = a.project_id where not a.by_id`;
  const found = new Map(rows.map((r) => [r.i, { id: r.id, publishedVersionId: r.publishedVersionId }]));
  return lookups.map((_, i) => found.get(i));
}

export async function deleteTemplate(sql: Sql | TxSql, projectId: string, templateId: string) {
  const rows = await sql`delete from templates where id = ${templateId} and project_id = ${projectId} returning id`;
  return rows.length > 0;
}
