import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { ApiError, errorResponses } from '../../http/errors.ts';
import type { AppEnv } from '../../http/context.ts';
import { SECURITY } from '../../http/security.ts';
import { PAGE_QUERY } from '../../http/paging.ts';
import { isWellFormedId } from '../../platform/ids.ts';
import { multipartSource } from './multipart.ts';
import { createImport } from './service.ts';
import { getImport, listImports } from './queries.ts';
import { ImportList, ImportResponse, toImportResponse } from './schemas.ts';

const ok = <T extends z.ZodTypeAny>(description: string, schema: T) => ({ description, content: { 'application/json': { schema } } });

export const CreateImportForm = z.object({
  file: z.string().openapi({ type: 'string', format: 'binary', description: 'The CSV, with a header line.' }),
  column_map: z.string().optional().openapi({
    description: 'JSON: field → CSV column, `{"email":"E-mail","first_name":"First","last_name":…,"unsubscribed":…,' +
      '"properties":{"plan":{"column":"Plan"}}}`. Fields left out take the column named like them (`email`, `first_name`, ' +
      '`last_name`, `unsubscribed`, `properties.<key>`); other columns are ignored.',
  }),
  segments: z.string().optional().openapi({ description: 'JSON: segment ids, or `[{"id":…}]`; every imported contact joins them.' }),
  topics: z.string().optional().openapi({ description: 'JSON: `[{"id":…,"subscription":"opt_in"|"opt_out"}]`, set on every imported contact.' }),
  on_conflict: z.enum(['upsert', 'skip']).optional().openapi({ description: 'For an address already a contact: update it (`upsert`, the default) or leave it alone (`skip`).' }),
}).openapi('CreateContactImport');

const create = createRoute({
  method: 'post', path: '/v1/contacts/imports', tags: ['contacts'], summary: 'Import contacts from a CSV', security: SECURITY,
  description:
    'Streams the CSV into the database (at most `CONTACT_IMPORT_MAX_BYTES`, 512 MiB by default; 413 past it) and answers 202 ' +
    'at once; the worker then imports it in batches. A field that is not valid JSON, a segment or topic not in the project, a ' +
    'mapped column not in the header, or a property column of an undeclared property answers 422 naming the field. Each row ' +
    'is checked on its own: a bad row is counted in `failed` and listed in `errors`, and the rest go on. Imports fire no ' +
    'per-contact webhook events.',
  request: { body: { required: true, content: { 'multipart/form-data': { schema: CreateImportForm } } } },
  responses: { 202: ok('The import, queued.', z.object({ id: z.string() })), ...errorResponses(401, 403, 413, 422, 429) },
});

const list = createRoute({
  method: 'get', path: '/v1/contacts/imports', tags: ['contacts'], summary: 'List contact imports', security: SECURITY,
  description: 'The project\'s imports, newest first, with cursor paging on `starting_after`.',
  request: { query: z.object({ ...PAGE_QUERY, status: z.enum(['queued', 'in_progress', 'completed', 'failed']).optional() }) },
  responses: { 200: ok('A page of imports.', ImportList), ...errorResponses(401, 403, 404, 422, 429) },
});

const get = createRoute({
  method: 'get', path: '/v1/contacts/imports/{import_id}', tags: ['contacts'], summary: 'Retrieve a contact import', security: SECURITY,
  description: 'Its status and counts as it goes, and the first 100 failed rows.',
  request: { params: z.object({ import_id: z.string().max(100) }) },
  responses: { 200: ok('The import.', ImportResponse), ...errorResponses(401, 403, 404, 422, 429) },
});

/** The import of this project, or 404. */
export async function requireImport(sql: AppEnv['Variables']['deps']['sql'], projectId: string, id: string) {
  const row = isWellFormedId('contactImport', id) ? await getImport(sql, projectId, id) : undefined;
  if (!row) throw new ApiError('not_found', 'Contact import not found.');
  return row;
}

/** Registered before the contacts routes, so `imports` is never read as a contact's id or address. */
export function registerContactImportRoutes(app: OpenAPIHono<AppEnv>) {
  // The body is streamed by busboy; the route above still documents it.
  app.openAPIRegistry.registerPath(create);
  app.post(create.path, async (c) => {
    const { sql, config } = c.var.deps;
    const source = await multipartSource(c, config.contactImportMaxBytes);
    const created = await createImport(sql, c.var.projectId, source, config.contactImportMaxBytes);
    return c.json({ id: created.id }, 202);
  });

  app.openapi(list, async (c) => {
    const { limit, starting_after: startingAfter, status } = c.req.valid('query');
    const { sql } = c.var.deps;
    if (startingAfter) await requireImport(sql, c.var.projectId, startingAfter);
    const page = await listImports(sql, c.var.projectId, { limit, startingAfter, status });
    return c.json({ data: page.rows.map(toImportResponse), has_more: page.hasMore }, 200);
  });

  app.openapi(get, async (c) => c.json(toImportResponse(await requireImport(c.var.deps.sql, c.var.projectId, c.req.valid('param').import_id)), 200));
}
