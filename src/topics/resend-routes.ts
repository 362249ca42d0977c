import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import * as q from './queries.ts';
import { createTopic, deleteTopic, requireTopic, updateTopic } from './service.ts';

/** `resend.topics.*` in Resend's shapes: the list is unpaginated `{data}`, oldest first. */
export function registerResendTopicRoutes(app: Hono<AppEnv>) {
  const item = (t: q.TopicRow) => ({
    id: t.id, name: t.name, description: t.description, default_subscription: t.defaultSubscription, visibility: t.visibility, created_at: t.createdAt.toISOString(),
  });
  app.post('/topics', async (c) => c.json({ id: (await createTopic(c.var.deps.sql, c.var.projectId, await readJsonBody(c, 16 * 1024))).id }, 200));
  app.get('/topics', async (c) => c.json({ data: (await q.allTopics(c.var.deps.sql, c.var.projectId)).map(item) }, 200));
  app.get('/topics/:id', async (c) => c.json(item(await requireTopic(c.var.deps.sql, c.var.projectId, c.req.param('id'))), 200));
  app.patch('/topics/:id', async (c) => c.json({ id: (await updateTopic(c.var.deps.sql, c.var.projectId, c.req.param('id'), await readJsonBody(c, 16 * 1024))).id }, 200));
  app.delete('/topics/:id', async (c) => {
    const topic = await deleteTopic(c.var.deps.sql, c.var.projectId, c.req.param('id'));
    return c.json({ object: 'topic' as const, id: topic.id, deleted: true }, 200);
  });
}
