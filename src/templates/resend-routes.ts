import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { createTemplate, deleteTemplate, duplicateTemplate, publishTemplate, requireTemplate, updateTemplate, MAX_SOURCE } from './service.ts';
import * as q from './queries.ts';
import type { TemplateRow } from './queries.ts';
import { resendPageQuery } from '../resend/paging.ts';
import { served } from './routes.ts';

/**
 * `resend.templates.*` at `/resend/templates`: the same templates as `/v1/templates`, in
 * Resend's request and response shapes (the SDK's create, get, list, update, remove, publish and
 * duplicate). Errors take Resend's shape from the `/resend` app's handler.
 */

const BODY_LIMIT = 8 * MAX_SOURCE + 256 * 1024;

/** Resend's template object. */
export function toResendTemplate(t: TemplateRow) {
  const updated = t.updatedAt.toISOString();
  return {
    object: 'template' as const,
    id: t.id,
    name: t.name,
    alias: t.alias,
    subject: t.subject,
    html: t.html,
    text: t.text,
    from: t.fromAddress,
    reply_to: t.replyToAddresses.length ? t.replyToAddresses : null,
    variables: t.variables.map((v) => ({ ...v, created_at: t.createdAt.toISOString(), updated_at: updated })),
    status: t.publishedVersionId ? 'published' as const : 'draft' as const,
    published_at: t.publishedAt?.toISOString() ?? null,
    created_at: t.createdAt.toISOString(),
    updated_at: updated,
    has_unpublished_versions: t.hasUnpublishedVersions,
    current_version_id: t.draftVersionId,
  };
}

const ref = (t: { id: string }) => ({ object: 'template' as const, id: t.id });

export function registerResendTemplateRoutes(app: Hono<AppEnv>) {
  app.post('/templates', async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(ref(await createTemplate(c.var.deps.sql, c.var.projectId, body)), 200);
  });

  app.get('/templates', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('template', cursor) && await q.getTemplate(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name a template of this project.');
    }
    const page = await q.listTemplates(sql, c.var.projectId, { limit, startingAfter: after, endingBefore: before });
    const data = page.rows.map((t) => {
      const { object: _object, html: _html, text: _text, variables: _variables, ...item } = toResendTemplate(t);
      return item;
    });
    return c.json({ object: 'list', has_more: page.hasMore, data }, 200);
  });

  app.get('/templates/:id', async (c) => c.json(toResendTemplate(await served(() => requireTemplate(c.var.deps.sql, c.var.projectId, c.req.param('id')))), 200));

  app.patch('/templates/:id', async (c) => {
    const body = await readJsonBody(c, BODY_LIMIT);
    return c.json(ref(await served(() => updateTemplate(c.var.deps.sql, c.var.projectId, c.req.param('id'), body))), 200);
  });

  app.delete('/templates/:id', async (c) => {
    const t = await served(() => deleteTemplate(c.var.deps.sql, c.var.projectId, c.req.param('id')));
    return c.json({ ...ref(t), deleted: true }, 200);
  });

  app.post('/templates/:id/publish', async (c) => c.json(ref(await served(() => publishTemplate(c.var.deps.sql, c.var.projectId, c.req.param('id')))), 200));

  app.post('/templates/:id/duplicate', async (c) => c.json(ref(await served(() => duplicateTemplate(c.var.deps.sql, c.var.projectId, c.req.param('id')))), 200));
}
