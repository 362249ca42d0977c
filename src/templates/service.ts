import { z } from '@hono/zod-openapi';
import { ApiError, ValidationError, validationErrorFromZod, type ValidationDetail } from '../http/errors.ts';
import type { Sql } from '../platform/db.ts';
import { isWellFormedId, newId } from '../platform/ids.ts';
import { ServiceError } from '../platform/errors.ts';
import { announceTemplateChange, findPublishedVersion } from './published.ts';
import { requireProject } from '../projects/service.ts';
import { mailbox, text, MAX_TEMPLATE_VARIABLES } from '../emails/validate.ts';
import type { RenderedTemplate, TemplateRenderer } from '../emails/template-send.ts';
import { bindValues, isReservedKey, RenderTooLarge, TemplateRuntimeError, VARIABLE_KEY, type TemplatePart, type TemplateVariable } from './engine.ts';
import { setTemplateCacheBytes, sourcePart, TemplateQueueFull, templateThread, type SourcePart } from './threads.ts';
import { hasMoreKeysThan } from '../emails/validate.ts';
import * as q from './queries.ts';
import { recordAudit } from '../audit/record.ts';

/**
 * Templates as every surface uses them (`/v1`, `/resend`, the dashboard, the CLI): validation of
 * what is stored, the draft and its publishing, and rendering, for sends from a cache of compiled
 * published versions.
 */

export const ALIAS = /^[a-z0-9_-]{1,64}$/;
/** Each part's source, in characters. */
export const MAX_SOURCE = 512 * 1024;

const issue = (type: string, message: string) => ({ message, params: { type } });

const Variable = z
  .object({
    key: z.string().regex(VARIABLE_KEY, 'A variable key is 1 to 64 letters, digits or _, not starting with a digit')
      .refine((k) => !isReservedKey(k), issue('value_error', 'That key is the name of a JavaScript object member; choose another')),
    type: z.enum(['string', 'number']),
    fallback_value: z.union([text().max(MAX_SOURCE), z.number().finite()]).nullable().optional(),
  })
  .superRefine((v, ctx) => {
    const f = v.fallback_value;
    if (f !== null && f !== undefined && typeof f !== (v.type === 'number' ? 'number' : 'string')) {
      ctx.addIssue({ code: 'custom', path: ['fallback_value'], ...issue(v.type === 'number' ? 'float_type' : 'string_type', `The fallback of a ${v.type} variable must be a ${v.type}`) });
    }
  })
  .openapi('TemplateVariable');

const Variables = z.array(Variable).max(MAX_TEMPLATE_VARIABLES).superRefine((list, ctx) => {
  const seen = new Set<string>();
  list.forEach((v, i) => {
    if (seen.has(v.key)) ctx.addIssue({ code: 'custom', path: [i, 'key'], ...issue('value_error', `Variable ${v.key} is declared twice`) });
    seen.add(v.key);
  });
});

const ReplyTo = z.union([mailbox(998), z.array(mailbox(998)).max(50)], { error: 'Input should be an email address or a list of email addresses' });

const fields = {
  name: text().trim().min(1).max(200).openapi({ example: 'Welcome' }),
  alias: z.string().regex(ALIAS, 'An alias is 1 to 64 of a-z, 0-9, - and _').nullable().optional()
    .openapi({ description: 'Unique in the project; sends and routes may use it in place of the id.', example: 'welcome' }),
  subject: text().max(998).nullable().optional().openapi({ example: 'Welcome, {{name}}' }),
  html: text().min(1).max(MAX_SOURCE).openapi({ example: '<p>Hello {{name}}</p>' }),
  text: text().max(MAX_SOURCE).nullable().optional().openapi({ example: 'Hello {{name}}' }),
  from: mailbox(320).nullable().optional().openapi({ example: 'Acme <hello@acme.example>' }),
  reply_to: ReplyTo.nullable().optional(),
  variables: Variables.optional(),
};

export const CreateTemplateRequest = z.object(fields).openapi('CreateTemplateRequest');
export const UpdateTemplateRequest = z
  .object({ ...fields, name: fields.name.optional(), html: fields.html.optional() })
  .openapi('UpdateTemplateRequest');
export const RenderTemplateRequest = z
  .object({
    variables: z.record(z.string().max(64), z.unknown()).optional(),
    version: z.number().int().min(1).optional().openapi({ description: 'A published version\'s number; without it, the draft.' }),
  })
  .openapi('RenderTemplateRequest');

type Create = z.infer<typeof CreateTemplateRequest>;
type Update = z.infer<typeof UpdateTemplateRequest>;

const list = (v: string | string[] | null | undefined) => (v == null ? [] : typeof v === 'string' ? [v] : v);
const variablesOf = (v: Create['variables']): TemplateVariable[] =>
  (v ?? []).map((x) => ({ key: x.key, type: x.type, fallback_value: x.fallback_value ?? null }));

function parse<T extends z.ZodTypeAny>(schema: T, body: unknown): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw validationErrorFromZod(parsed.error, 'json');
  return parsed.data;
}

/** The parts that have text, each with the key its compiled form is cached by. */
function sourceParts(parts: Partial<Record<TemplatePart, string | null>>): SourcePart[] {
  return (Object.entries(parts) as [TemplatePart, string | null][]).filter(([, source]) => source).map(([part, source]) => sourcePart(part, source!));
}

/** §22.8: a project with more than its share of template work waiting waits itself, not the others. */
const queueFull = () => new ApiError('rate_limit_exceeded', 'Too many template renders of this project are waiting; retry shortly.', { 'Retry-After': '1' });

/**
 * Every part checked against the declared variables, all problems at once. It runs in the
 * template thread, which keeps each part compiled: a draft compiles once per text, not per preview.
 */
async function checkParts(projectId: string, parts: Partial<Record<TemplatePart, string | null>>, variables: TemplateVariable[]) {
  const tooMany = (Object.entries(parts) as [TemplatePart, string | null][])
    .filter(([, source]) => source && moreExpressionsThan(source, MAX_EXPRESSIONS))
    .map(([part]): ValidationDetail => ({
      loc: ['body', part], msg: `A template part holds at most ${MAX_EXPRESSIONS} {{…}} expressions`, type: 'too_many_expressions', ctx: { max_expressions: MAX_EXPRESSIONS },
    }));
  if (tooMany.length) throw new ValidationError(tooMany);
  let problems: ValidationDetail[];
  try {
    problems = await templateThread().check(projectId, sourceParts(parts), variables.map((v) => v.key));
  } catch (err) {
    if (err instanceof TemplateQueueFull) throw queueFull();
    if (!(err instanceof TemplateRuntimeError)) throw err;
    throw new ValidationError([{ loc: ['body'], msg: `The template could not be compiled: ${err.message}`, type: 'template_too_complex' }]);
  }
  if (problems.length) throw new ValidationError(problems);
}

/**
 * Expressions per part. Handlebars' compiler takes about half a second and tens of MB per
 * thousand of them, so the count is checked first, on the text, and stops at the first one over.
 */
export const MAX_EXPRESSIONS = 2000;
function moreExpressionsThan(source: string, max: number): boolean {
  let n = 0;
  for (let at = source.indexOf('{{'); at >= 0; at = source.indexOf('{{', at + 2)) if (++n > max) return true;
  return false;
}

/** The alias index's unique violation, as the 422 that names the field. */
async function aliasTaken<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if ((err as { code?: string; constraint_name?: string }).code === '23505') {
      throw new ValidationError([{ loc: ['body', 'alias'], msg: 'Another template of this project has that alias', type: 'alias_taken' }]);
    }
    throw err;
  }
}

const notFound = () => new ServiceError('not_found', 'Template not found.');

/** A path or CLI argument that can name a template: an id, or an alias. */
export const canName = (idOrAlias: string) => (idOrAlias.startsWith('tmpl_') ? isWellFormedId('template', idOrAlias) : ALIAS.test(idOrAlias));

export async function requireTemplate(sql: Sql, projectId: string, idOrAlias: string) {
  const row = canName(idOrAlias) ? await q.getTemplate(sql, projectId, idOrAlias) : undefined;
  if (!row) throw notFound();
  return row;
}

/** A new template: a draft at version 1. */
export async function createTemplate(sql: Sql, projectId: string, body: unknown) {
  const input = parse(CreateTemplateRequest, body);
  const variables = variablesOf(input.variables);
  await checkParts(projectId, { subject: input.subject, html: input.html, text: input.text }, variables);
  await requireProject(sql, projectId);
  return aliasTaken(() => insertAudited(sql, {
    id: newId('template'), projectId, name: input.name, alias: input.alias ?? null, draftVersionId: newId('templateVersion'),
    subject: input.subject ?? null, html: input.html, text: input.text ?? null, fromAddress: input.from ?? null,
    replyToAddresses: list(input.reply_to), variables,
  }));
}

/** A new template and its `template.created` entry. Contents are named, not copied, into the log. */
function insertAudited(sql: Sql, t: Parameters<typeof q.insertTemplate>[1]) {
  return sql.begin(async (tx) => {
    const row = await q.insertTemplate(tx, t);
    await recordAudit(tx, {
      action: 'template.created', projectId: t.projectId, target: { type: 'template', id: row.id },
      changes: { name: row.name, alias: row.alias, version: row.currentVersion },
    });
    return row;
  });
}

/** Edits the draft; sends keep using the published version until the next publish. */
export async function updateTemplate(sql: Sql, projectId: string, idOrAlias: string, body: unknown) {
  const input: Update = parse(UpdateTemplateRequest, body);
  const current = await requireTemplate(sql, projectId, idOrAlias);
  const variables = input.variables === undefined ? current.variables : variablesOf(input.variables);
  const merged = {
    subject: input.subject === undefined ? current.subject : input.subject,
    html: input.html ?? current.html,
    text: input.text === undefined ? current.text : input.text,
  };
  await checkParts(projectId, merged, variables);
  const row = await aliasTaken(() => sql.begin(async (tx) => {
    const updated = await q.updateDraft(tx, projectId, current.id, {
      name: input.name,
      alias: input.alias,
      subject: input.subject,
      html: input.html,
      text: input.text,
      fromAddress: input.from,
      replyToAddresses: input.reply_to === undefined ? undefined : list(input.reply_to),
      variables: input.variables === undefined ? undefined : variables,
    }, newId('templateVersion'));
    if (updated) {
      await recordAudit(tx, {
        action: 'template.updated', projectId, target: { type: 'template', id: current.id },
        changes: { name: input.name, alias: input.alias, fields: Object.keys(input).filter((k) => (input as Record<string, unknown>)[k] !== undefined).sort() },
      });
    }
    return updated;
  }));
  if (!row) throw notFound();
  // An alias may have moved: sends must not find this template under its old one.
  if (input.alias !== undefined) await announceTemplateChange(sql);
  return row;
}

/** The draft becomes the version sends use. Publishing an unchanged draft changes nothing. */
export async function publishTemplate(sql: Sql, projectId: string, idOrAlias: string) {
  const current = await requireTemplate(sql, projectId, idOrAlias);
  const published = await sql.begin(async (tx) => {
    const row = await q.publishDraft(tx, projectId, current.id);
    // Publishing an unchanged draft changes nothing, so it records nothing.
    if (row) await recordAudit(tx, { action: 'template.published', projectId, target: { type: 'template', id: current.id }, changes: { version: row.currentVersion } });
    return row;
  });
  if (!published) return current;
  await announceTemplateChange(sql);
  return published;
}

/** A copy of the draft as a new template (Resend's duplicate): a draft, without the alias. */
export async function duplicateTemplate(sql: Sql, projectId: string, idOrAlias: string) {
  const t = await requireTemplate(sql, projectId, idOrAlias);
  return insertAudited(sql, {
    id: newId('template'), projectId, name: `${t.name} (copy)`.slice(0, 200), alias: null, draftVersionId: newId('templateVersion'),
    subject: t.subject, html: t.html, text: t.text, fromAddress: t.fromAddress, replyToAddresses: t.replyToAddresses, variables: t.variables,
  });
}

export async function deleteTemplate(sql: Sql, projectId: string, idOrAlias: string) {
  const t = await requireTemplate(sql, projectId, idOrAlias);
  const deleted = await sql.begin(async (tx) => {
    if (!(await q.deleteTemplate(tx, projectId, t.id))) return false;
    await recordAudit(tx, { action: 'template.deleted', projectId, target: { type: 'template', id: t.id }, changes: { name: t.name, alias: t.alias } });
    return true;
  });
  if (!deleted) throw notFound();
  await announceTemplateChange(sql);
  return t;
}

export async function listTemplateVersions(sql: Sql, projectId: string, idOrAlias: string) {
  const t = await requireTemplate(sql, projectId, idOrAlias);
  return { template: t, versions: await q.listVersions(sql, projectId, t.id) };
}

/** A version as sends use it: what the template gives an email, and its parts' text. */
type Version = {
  versionId: string;
  templateId: string;
  version: number;
  parts: SourcePart[];
  from: string | null;
  replyTo: string[];
  variables: TemplateVariable[];
  bytes: number;
};

function versionOf(v: q.TemplateContent & { id: string; templateId: string; version: number }): Version {
  const parts = sourceParts({ subject: v.subject, html: v.html, text: v.text });
  return {
    versionId: v.id, templateId: v.templateId, version: v.version, parts,
    from: v.fromAddress, replyTo: v.replyToAddresses, variables: v.variables,
    bytes: parts.reduce((n, p) => n + p.source.length * 2, 0) + 1024,
  };
}

/**
 * Published versions by their id, up to TEMPLATE_CACHE_MB of text (their compiled forms live in
 * the template thread, under the same budget). A version never changes once published, so an
 * entry is never stale; the least recently used go past the budget.
 */
let cacheBytes = 64 * 1024 * 1024;
let cachedBytes = 0;
const versions = new Map<string, Version>();

/** TEMPLATE_CACHE_MB: the byte budget of each template cache. */
export function setTemplateCacheMb(mb: number) {
  cacheBytes = mb * 1024 * 1024;
  setTemplateCacheBytes(cacheBytes);
}

async function publishedVersion(sql: Sql, projectId: string, versionId: string) {
  const hit = versions.get(versionId);
  if (hit) {
    versions.delete(versionId);
    versions.set(versionId, hit);
    return hit;
  }
  const row = await q.getVersionById(sql, projectId, versionId);
  if (!row) return undefined;
  const entry = versionOf(row);
  if (entry.bytes <= cacheBytes && !versions.has(versionId)) {
    versions.set(versionId, entry);
    cachedBytes += entry.bytes;
    for (const [id, v] of versions) {
      if (cachedBytes <= cacheBytes) break;
      versions.delete(id);
      cachedBytes -= v.bytes;
    }
  }
  return entry;
}

/** How many template parts the template thread has compiled, for tests that check nothing compiles per send. */
export const templateCompiles = async () => (await templateThread().stats()).compiles;

/**
 * Renders with the declared variables bound. `loc` says where the caller's variables sit in
 * its body: `["body", "template"]` for a send, `["body"]` for the render route.
 */
async function renderWith(projectId: string, v: Pick<Version, 'parts' | 'variables'>, given: Record<string, unknown>, limitBytes: number, loc: (string | number)[]) {
  const { values, problems } = bindValues(v.variables, given);
  if (problems.length) throw new ValidationError(problems.map((p) => ({ loc: [...loc, 'variables', p.key], msg: p.msg, type: p.type })));
  try {
    const out = await templateThread().render(projectId, v.parts, values, limitBytes);
    return { subject: out.subject ?? null, html: out.html ?? null, text: out.text ?? null };
  } catch (err) {
    if (err instanceof TemplateQueueFull) throw queueFull();
    if (err instanceof RenderTooLarge) {
      throw new ValidationError([{
        loc: ['body'], msg: `The rendered message is over ${limitBytes} bytes, the limit (rendering stops there, and loops after 100000 turns)`, type: 'message_too_large',
        ctx: { limit_bytes: limitBytes, size_bytes: Math.max(err.sizeBytes, limitBytes + 1) },
      }]);
    }
    if (err instanceof TemplateRuntimeError) throw new ValidationError([{ loc, msg: `The template could not be rendered: ${err.message.split('\n')[0]}`, type: 'template_render_failed' }]);
    throw err;
  }
}

const templateNotFound = (loc: (string | number)[], id: string) =>
  new ValidationError([{ loc, msg: `No template ${id} in this project`, type: 'template_not_found' }]);

/** The renderer sends use (wired into the accept path by the app): the published version, compiled once. */
export const renderForSend: TemplateRenderer = async (sql, projectId, ref, limitBytes): Promise<RenderedTemplate> => {
  const found = canName(ref.id) ? await findPublishedVersion(sql, projectId, ref.id) : undefined;
  if (!found) throw templateNotFound(['body', 'template', 'id'], ref.id);
  if (!found.publishedVersionId) {
    throw new ValidationError([{ loc: ['body', 'template', 'id'], msg: `Template ${ref.id} has never been published; publish it before sending with it`, type: 'template_not_published' }]);
  }
  const version = await publishedVersion(sql, projectId, found.publishedVersionId);
  if (!version) throw templateNotFound(['body', 'template', 'id'], ref.id); // deleted in between
  const out = await renderWith(projectId, version, ref.variables, limitBytes, ['body', 'template']);
  return { templateId: version.templateId, version: version.version, subject: out.subject, html: out.html, text: out.text, from: version.from, replyTo: version.replyTo };
};

/** Renders without sending: the draft, or a published version by number. */
export async function renderTemplate(sql: Sql, projectId: string, idOrAlias: string, body: unknown, limitBytes: number) {
  // Counted before any entry is validated.
  if (body && typeof body === 'object' && hasMoreKeysThan((body as { variables?: unknown }).variables, MAX_TEMPLATE_VARIABLES)) {
    throw new ValidationError([{ loc: ['body', 'variables'], msg: `At most ${MAX_TEMPLATE_VARIABLES} variables`, type: 'too_long', ctx: { max_length: MAX_TEMPLATE_VARIABLES } }]);
  }
  const input = parse(RenderTemplateRequest, body ?? {});
  const t = await requireTemplate(sql, projectId, idOrAlias);
  let source: Pick<Version, 'parts' | 'variables'>;
  if (input.version === undefined) {
    // The draft: its parts are keyed by their text, so each text compiles once, not per preview.
    source = versionOf({ ...t, templateId: t.id, version: t.currentVersion });
  } else {
    const v = await q.getVersion(sql, projectId, t.id, input.version);
    if (!v) throw new ValidationError([{ loc: ['body', 'version'], msg: `Template ${t.id} has no published version ${input.version}`, type: 'version_not_found' }]);
    source = (await publishedVersion(sql, projectId, v.id))!;
  }
  const out = await renderWith(projectId, source, input.variables ?? {}, limitBytes, ['body']);
  return { subject: out.subject, html: out.html, text: out.text };
}
