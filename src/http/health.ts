import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { pingDatabase } from '../platform/db.ts';
import { schemaState } from '../platform/schema-version.ts';
import type { AppEnv } from './context.ts';

const HealthResponse = z.object({ status: z.literal('ok') }).openapi('HealthResponse');
const ReadinessResponse = z
  .object({
    status: z.enum(['ready', 'not_ready']),
    dependencies: z.object({ database: z.boolean(), cache: z.boolean() }),
  })
  .openapi('ReadinessResponse');

const healthz = createRoute({
  method: 'get',
  path: '/healthz',
  tags: ['probes'],
  summary: 'Liveness',
  description: 'Answers 200 while the process runs. Checks nothing else.',
  responses: { 200: { description: 'Alive.', content: { 'application/json': { schema: HealthResponse } } } },
});

const readyz = createRoute({
  method: 'get',
  path: '/readyz',
  tags: ['probes'],
  summary: 'Readiness',
  description: 'Round-trips PostgreSQL and Redis, one second each. 503 when either does not answer, or while the database schema is behind this build (migrations pending: `database` is false).',
  responses: {
    200: { description: 'Ready.', content: { 'application/json': { schema: ReadinessResponse } } },
    503: { description: 'A dependency is unreachable.', content: { 'application/json': { schema: ReadinessResponse } } },
  },
});

export function registerHealthRoutes(app: OpenAPIHono<AppEnv>) {
  app.openapi(healthz, (c) => c.json({ status: 'ok' as const }, 200));
  app.openapi(readyz, async (c) => {
    const { sql, limiter } = c.var.deps;
    const [reachable, cache] = await Promise.all([pingDatabase(sql), limiter.ready()]);
    const database = reachable && (await schemaState(sql)) === 'current';
    const ready = database && cache;
    return c.json({ status: ready ? ('ready' as const) : ('not_ready' as const), dependencies: { database, cache } }, ready ? 200 : 503);
  });
}
