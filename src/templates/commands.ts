import { readFile } from 'node:fs/promises';
import { ValidationError } from '../http/errors.ts';
import type { Sql } from '../platform/db.ts';
import { ServiceError } from '../platform/errors.ts';
import { toTemplateListItem, toTemplateResponse } from './schemas.ts';
import { createTemplate, publishTemplate, renderTemplate, requireTemplate, updateTemplate, canName } from './service.ts';
import { findTemplateProject, listTemplates } from './queries.ts';
import type { Command } from '../commands.ts';

/**
 * The operator CLI's `template …` commands. The service functions are the API's; a 422 becomes
 * one line naming each field.
 */

type Values = Record<string, string | boolean | undefined>;

const opt = (v: Values, name: string) => (typeof v[name] === 'string' ? v[name] as string : undefined);

async function fileText(path: string | undefined, flag: string): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    throw new ServiceError('invalid_input', `--${flag}: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

function jsonOption(v: Values, name: string): unknown {
  const raw = opt(v, name);
  if (raw === undefined) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    throw new ServiceError('invalid_input', `--${name} takes JSON, such as '[{"key":"name","type":"string"}]'`);
  }
}

/** Runs a service call, turning its 422 into the CLI's one-line error. */
async function asCli<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ValidationError) {
      throw new ServiceError('invalid_input', err.detail.map((d) => `${d.loc.filter((p) => p !== 'body').join('.') || 'body'}: ${d.msg}`).join('; '));
    }
    throw err;
  }
}

/** The project of the template an argument names: an id finds its own; an alias needs --project. */
async function projectOf(sql: Sql, v: Values, idOrAlias: string | undefined, usage: string): Promise<[string, string]> {
  if (!idOrAlias) throw new ServiceError('invalid_input', `TEMPLATE is required: ${usage}`);
  const given = opt(v, 'project');
  if (given) return [given, idOrAlias];
  if (!canName(idOrAlias) || !idOrAlias.startsWith('tmpl_')) throw new ServiceError('invalid_input', `an alias needs --project: ${usage}`);
  const projectId = await findTemplateProject(sql, idOrAlias);
  if (!projectId) throw new ServiceError('not_found', `template ${idOrAlias} not found`);
  return [projectId, idOrAlias];
}

/** The draft's fields from the options; only those given. */
async function draftFields(v: Values) {
  const body: Record<string, unknown> = {};
  const html = await fileText(opt(v, 'html-file'), 'html-file');
  const text = await fileText(opt(v, 'text-file'), 'text-file');
  if (opt(v, 'name') !== undefined) body.name = opt(v, 'name');
  if (html !== undefined) body.html = html;
  if (text !== undefined) body.text = text;
  for (const name of ['subject', 'alias', 'from'] as const) if (opt(v, name) !== undefined) body[name] = opt(v, name);
  if (opt(v, 'reply-to') !== undefined) body.reply_to = opt(v, 'reply-to');
  const variables = jsonOption(v, 'variables');
  if (variables !== undefined) body.variables = variables;
  return body;
}

const DRAFT_OPTIONS = {
  name: { type: 'string' }, 'html-file': { type: 'string' }, 'text-file': { type: 'string' }, subject: { type: 'string' },
  alias: { type: 'string' }, from: { type: 'string' }, 'reply-to': { type: 'string' }, variables: { type: 'string' }, project: { type: 'string' },
} as const;

export const TEMPLATE_COMMANDS: Record<string, Command> = {
  'template create': {
    usage: 'template create --project P --name N --html-file F [--subject S] [--text-file F] [--alias A] [--from F] [--reply-to R] [--variables JSON]',
    options: DRAFT_OPTIONS,
    async run(ctx, v) {
      const projectId = opt(v, 'project');
      if (!projectId) throw new ServiceError('invalid_input', `--project is required: ${this.usage}`);
      if (!opt(v, 'html-file')) throw new ServiceError('invalid_input', `--html-file is required: ${this.usage}`);
      const body = await draftFields(v);
      return toTemplateResponse(await asCli(() => createTemplate(ctx.sql(), projectId, body)));
    },
  },
  'template update': {
    usage: 'template update TEMPLATE [--project P] [--name N] [--html-file F] [--subject S] [--text-file F] [--alias A] [--from F] [--reply-to R] [--variables JSON]',
    options: DRAFT_OPTIONS,
    async run(ctx, v, args) {
      const [projectId, id] = await projectOf(ctx.sql(), v, args[0], this.usage);
      const body = await draftFields(v);
      return toTemplateResponse(await asCli(() => updateTemplate(ctx.sql(), projectId, id, body)));
    },
  },
  'template publish': {
    usage: 'template publish TEMPLATE [--project P]',
    options: { project: { type: 'string' } },
    async run(ctx, v, args) {
      const [projectId, id] = await projectOf(ctx.sql(), v, args[0], this.usage);
      return toTemplateResponse(await publishTemplate(ctx.sql(), projectId, id));
    },
  },
  'template render': {
    usage: 'template render TEMPLATE [--project P] [--variables JSON] [--version N]',
    options: { project: { type: 'string' }, variables: { type: 'string' }, version: { type: 'string' } },
    async run(ctx, v, args) {
      const [projectId, id] = await projectOf(ctx.sql(), v, args[0], this.usage);
      const version = opt(v, 'version');
      if (version !== undefined && !/^[1-9]\d{0,8}$/.test(version)) throw new ServiceError('invalid_input', `--version takes a version number: ${this.usage}`);
      const body = { variables: jsonOption(v, 'variables') ?? {}, ...(version ? { version: Number(version) } : {}) };
      return asCli(() => renderTemplate(ctx.sql(), projectId, id, body, ctx.config.emailMaxMessageBytes));
    },
  },
  'template get': {
    usage: 'template get TEMPLATE [--project P]',
    options: { project: { type: 'string' } },
    async run(ctx, v, args) {
      const [projectId, id] = await projectOf(ctx.sql(), v, args[0], this.usage);
      return toTemplateResponse(await requireTemplate(ctx.sql(), projectId, id));
    },
  },
  'template list': {
    usage: 'template list --project P',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      const projectId = opt(v, 'project');
      if (!projectId) throw new ServiceError('invalid_input', `--project is required: ${this.usage}`);
      const page = await listTemplates(ctx.sql(), projectId, { limit: 100 });
      return { data: page.rows.map(toTemplateListItem), has_more: page.hasMore };
    },
  },
};
