import type { Hono } from 'hono';
import type { AppEnv } from '../../http/context.ts';
import { ValidationError } from '../../http/errors.ts';
import { resendPageQuery } from '../../resend/paging.ts';
import { multipartSource } from './multipart.ts';
import { createImport } from './service.ts';
import { listImports, type ImportRow } from './queries.ts';
import { counts } from './schemas.ts';
import { requireImport } from './routes.ts';

/** Resend's contact import object. */
export function toResendImport(r: ImportRow) {
  return {
    object: 'contact_import' as const,
    id: r.id,
    status: r.status,
    created_at: r.createdAt.toISOString(),
    completed_at: r.completedAt?.toISOString() ?? null,
    counts: counts(r),
  };
}

const STATUSES = new Set(['queued', 'in_progress', 'completed', 'failed']);

/** `resend.contacts.imports.*` at `/resend/contacts/imports`: the same imports as `/v1`, in Resend's shapes. */
export function registerResendContactImportRoutes(app: Hono<AppEnv>) {
  app.post('/contacts/imports', async (c) => {
    const { sql, config } = c.var.deps;
    const created = await createImport(sql, c.var.projectId, await multipartSource(c, config.contactImportMaxBytes), config.contactImportMaxBytes);
    return c.json({ object: 'contact_import', id: created.id }, 200);
  });

  app.get('/contacts/imports', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const status = c.req.query('status');
    if (status !== undefined && !STATUSES.has(status)) throw new ValidationError([{ loc: ['query', 'status'], msg: 'status must be queued, in_progress, completed or failed', type: 'enum' }]);
    const { sql } = c.var.deps;
    if (cursor !== undefined) await requireImport(sql, c.var.projectId, cursor);
    const page = await listImports(sql, c.var.projectId, { limit, startingAfter: after, endingBefore: before, status: status as ImportRow['status'] | undefined });
    return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(toResendImport) }, 200);
  });

  app.get('/contacts/imports/:id', async (c) => c.json(toResendImport(await requireImport(c.var.deps.sql, c.var.projectId, c.req.param('id'))), 200));
}
