import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import type { Context } from 'hono';
import { ApiError, errorResponses } from '../http/errors.ts';
import type { AppEnv } from '../http/context.ts';
import { SECURITY } from '../http/security.ts';
import { readJsonBody } from '../http/body.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { ServiceError } from '../platform/errors.ts';
import {
  CreateTemplateRequest, RenderTemplateRequest, UpdateTemplateRequest, createTemplate, deleteTemplate, listTemplateVersions,
  publishTemplate, renderTemplate, requireTemplate, updateTemplate, MAX_SOURCE,
} from './service.ts';
import { RenderedTemplateResponse, TemplateList, TemplateResponse, TemplateVersionList, toTemplateListItem, toTemplateResponse } from './schemas.ts';
import * as q from './queries.ts';
import { PAGE_QUERY } from '../http/paging.ts';

/** A template body holds three parts of at most MAX_SOURCE characters each, JSON-escaped. */
const BODY_LIMIT = 8 * MAX_SOURCE + 256 * 1024;

const IdParam = z.object({ template_id: z.string().max(100).openapi({ description: 'The template\'s id (`tmpl_…`) or its alias.' }) });
const json = <T extends z.ZodTypeAny>(schema: T) => ({ required: true, content: { 'application/json': { schema } } });
const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });

const create = createRoute({
  method: 'post', path: '/v1/templates', tags: ['templates'], summary: 'Create a template', security: SECURITY,
  description:
    'A new template, as a `draft` at version 1. Sources are Handlebars with the built-in helpers only (`if`, `unless`, `each`, ' +
    '`with`, `lookup`); `{{name}}` is HTML-escaped in `html` and inserted as is in `subject` and `text`. A source that does not ' +
    'parse, or reads a top-level name not declared in `variables`, answers 422 with the part, line and column.',
  request: { body: json(CreateTemplateRequest) },
  responses: { 201: ok('The template.', TemplateResponse), ...errorResponses(401, 403, 413, 422, 429) },
});

const list = createRoute({
  method: 'get', path: '/v1/templates', tags: ['templates'], summary: 'List templates', security: SECURITY,
  description: 'The project\'s templates, newest first, with cursor paging on `starting_after`. Items omit `html` and `text`.',
  request: {
    query: z.object({
      ...PAGE_QUERY,
    }),
  },
  responses: { 200: ok('A page of templates.', TemplateList), ...errorResponses(401, 403, 404, 422, 429) },
});

const get = createRoute({
  method: 'get', path: '/v1/templates/{template_id}', tags: ['templates'], summary: 'Retrieve a template', security: SECURITY,
  description: 'By id or alias, with its draft.',
  request: { params: IdParam },
  responses: { 200: ok('The template.', TemplateResponse), ...errorResponses(401, 403, 404, 422, 429) },
});

const update = createRoute({
  method: 'patch', path: '/v1/templates/{template_id}', tags: ['templates'], summary: 'Edit the draft', security: SECURITY,
  description: 'Changes the draft; `has_unpublished_versions` becomes true. Sends keep the published version until the next publish.',
  request: { params: IdParam, body: json(UpdateTemplateRequest) },
  responses: { 200: ok('The template.', TemplateResponse), ...errorResponses(401, 403, 404, 413, 422, 429) },
});

const publish = createRoute({
  method: 'post', path: '/v1/templates/{template_id}/publish', tags: ['templates'], summary: 'Publish the draft', security: SECURITY,
  description: 'The draft becomes the version sends use, numbered `current_version`. An unchanged draft is left as it is.',
  request: { params: IdParam },
  responses: { 200: ok('The template.', TemplateResponse), ...errorResponses(401, 403, 404, 422, 429) },
});

const versions = createRoute({
  method: 'get', path: '/v1/templates/{template_id}/versions', tags: ['templates'], summary: 'List published versions', security: SECURITY,
  description: 'Every published version with its number and time, newest first.',
  request: { params: IdParam },
  responses: { 200: ok('The versions.', TemplateVersionList), ...errorResponses(401, 403, 404, 422, 429) },
});

const render = createRoute({
  method: 'post', path: '/v1/templates/{template_id}/render', tags: ['templates'], summary: 'Render without sending', security: SECURITY,
  description:
    'Renders the draft, or the published `version` given, with `variables` bound as a send would bind them: a missing variable ' +
    'without a fallback, or a value of the wrong type, answers 422 at `["body", "variables", key]`.',
  request: { params: IdParam, body: json(RenderTemplateRequest) },
  responses: { 200: ok('The rendered parts.', RenderedTemplateResponse), ...errorResponses(401, 403, 404, 413, 422, 429) },
});

const remove = createRoute({
  method: 'delete', path: '/v1/templates/{template_id}', tags: ['templates'], summary: 'Delete a template', security: SECURITY,
  description: 'Removes the template and its versions. Emails sent with it keep what they were sent with.',
  request: { params: IdParam },
  responses: { 204: { description: 'Deleted.' }, ...errorResponses(401, 403, 404, 422, 429) },
});

/** Service errors as the API's: a template that is not there is a 404. */
export async function served<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ServiceError && err.code === 'not_found') throw new ApiError('not_found', 'Template not found.');
    throw err;
  }
}

const idOf = (c: Context<AppEnv>) => c.req.param('template_id') ?? '';
const pathOf = (route: { path: string }) => route.path.replace('{template_id}', ':template_id');

export function registerTemplateRoutes(app: OpenAPIHono<AppEnv>) {
  // Bodies are read with a byte bound (the json validator would buffer any size); the routes
  // above still document them.
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toTemplateResponse(await served(() => createTemplate(c.var.deps.sql, c.var.projectId, body))), 201);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter && !(isWellFormedId('template', startingAfter) && await q.getTemplate(sql, c.var.projectId, startingAfter))) {
      throw new ApiError('not_found', 'starting_after does not name a template of this project.');
    }
    const page = await q.listTemplates(sql, c.var.projectId, { limit, startingAfter });
    return c.json({ data: page.rows.map(toTemplateListItem), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => c.json(toTemplateResponse(await served(() => requireTemplate(c.var.deps.sql, c.var.projectId, idOf(c)))), 200));

  app.openAPIRegistry.registerPath(update);
  app.patch(pathOf(update), async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(toTemplateResponse(await served(() => updateTemplate(c.var.deps.sql, c.var.projectId, idOf(c), body))), 200);
  });

  app.openapi(publish, async (c) => c.json(toTemplateResponse(await served(() => publishTemplate(c.var.deps.sql, c.var.projectId, idOf(c)))), 200));

  app.openapi(versions, async (c) => {
    const { versions: rows } = await served(() => listTemplateVersions(c.var.deps.sql, c.var.projectId, idOf(c)));
    return c.json({ data: rows.map((v) => ({ id: v.id, version: v.version, published_at: v.publishedAt.toISOString() })) }, 200);
  });

  app.openAPIRegistry.registerPath(render);
  app.post(pathOf(render), async (c) => {
    const { deps } = c.var;
    const body = await readJsonBody(c, deps.config.emailMaxMessageBytes + 1024 * 1024);
    return c.json(await served(() => renderTemplate(deps.sql, c.var.projectId, idOf(c), body, deps.config.emailMaxMessageBytes)), 200);
  });

  app.openapi(remove, async (c) => {
    await served(() => deleteTemplate(c.var.deps.sql, c.var.projectId, idOf(c)));
    return c.body(null, 204);
  });
}
