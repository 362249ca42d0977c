import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { requireSegment } from '../contacts/service.ts';
import { resendPageQuery } from '../resend/paging.ts';
import * as q from './queries.ts';
import { createSegment, deleteSegment, renameSegment } from './service.ts';

/** `resend.segments.*`, and `resend.audiences.*` (the same object at `/audiences`), in Resend's shapes. */
export function registerResendSegmentRoutes(app: Hono<AppEnv>) {
  const item = (s: q.SegmentRow) => ({ id: s.id, name: s.name, created_at: s.createdAt.toISOString() });
  for (const base of ['/segments', '/audiences']) {
    app.post(base, async (c) => {
      const segment = await createSegment(c.var.deps.sql, c.var.projectId, await readJsonBody(c, 16 * 1024));
      return c.json({ object: 'segment' as const, id: segment.id, name: segment.name }, 200);
    });
    app.get(base, async (c) => {
      const { limit, after, before, cursor } = resendPageQuery(c);
      if (cursor !== undefined) await requireSegment(c.var.deps.sql, c.var.projectId, cursor);
      const page = await q.listSegments(c.var.deps.sql, c.var.projectId, { limit, startingAfter: after, endingBefore: before });
      return c.json({ object: 'list', has_more: page.hasMore, data: page.rows.map(item) }, 200);
    });
    app.get(`${base}/:id`, async (c) => c.json({ object: 'segment' as const, ...item(await requireSegment(c.var.deps.sql, c.var.projectId, c.req.param('id'))) }, 200));
    app.patch(`${base}/:id`, async (c) => {
      const segment = await renameSegment(c.var.deps.sql, c.var.projectId, c.req.param('id'), await readJsonBody(c, 16 * 1024));
      return c.json({ object: 'segment' as const, id: segment.id }, 200);
    });
    app.delete(`${base}/:id`, async (c) => {
      const segment = await deleteSegment(c.var.deps.sql, c.var.projectId, c.req.param('id'));
      return c.json({ object: 'segment' as const, id: segment.id, deleted: true }, 200);
    });
  }
}
