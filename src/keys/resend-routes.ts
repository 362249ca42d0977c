import type { Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import { readJsonBody } from '../http/body.ts';
import { ApiError, ValidationError } from '../http/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { ServiceError } from '../platform/errors.ts';
import { resendPageQuery } from '../resend/paging.ts';
import { findKey, listActiveKeysPage } from './queries.ts';
import { createApiKey, renameApiKey, revokeApiKey } from './service.ts';

/**
 * `resend.apiKeys.*` at `/resend/api-keys`, through the same service as the CLI and dashboard
 * (audit entries included). Resend's `full_access` is Mailroom's `full`, `sending_access` its
 * `sending`; remove is revocation; update renames. Mailroom keys are not limited to a domain.
 */

const PERMISSION = { full_access: 'full', sending_access: 'sending' } as const;
const invalid = (field: string, msg: string) => new ValidationError([{ loc: ['body', field], msg, type: 'value_error' }]);

const keyId = (value: string | undefined) => {
  if (!value || !isWellFormedId('key', value)) throw new ApiError('not_found', 'API key not found.');
  return value;
};

export function registerResendKeyRoutes(app: Hono<AppEnv>) {
  app.post('/api-keys', async (c) => {
    const body = (await readJsonBody(c, 16 * 1024)) as Record<string, unknown> | null;
    if (!body || typeof body !== 'object' || typeof body.name !== 'string') throw invalid('name', 'name is required');
    const permission = body.permission ?? 'full_access';
    if (typeof permission !== 'string' || !(permission in PERMISSION)) throw invalid('permission', 'permission must be full_access or sending_access');
    if (body.domain_id !== undefined && body.domain_id !== null) {
      throw invalid('domain_id', 'Mailroom keys are not limited to one domain: a sending_access key sends from any verified domain of the project');
    }
    try {
      const key = await createApiKey(c.var.deps.sql, c.var.projectId, body.name, PERMISSION[permission as keyof typeof PERMISSION]);
      return c.json({ id: key.id, token: key.key }, 200);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'invalid_input') throw invalid('name', err.message);
      throw err;
    }
  });

  app.get('/api-keys', async (c) => {
    const { limit, after, before, cursor } = resendPageQuery(c);
    const { sql } = c.var.deps;
    if (cursor !== undefined && !(isWellFormedId('key', cursor) && await findKey(sql, c.var.projectId, cursor))) {
      throw new ApiError('not_found', 'The cursor does not name an API key of this project.');
    }
    const page = await listActiveKeysPage(sql, c.var.projectId, { limit, after, before });
    const data = page.rows.map((k) => ({ id: k.id, name: k.name, created_at: k.createdAt.toISOString(), last_used_at: k.lastUsedAt?.toISOString() ?? null }));
    return c.json({ object: 'list', has_more: page.hasMore, data }, 200);
  });

  app.patch('/api-keys/:id', async (c) => {
    const id = keyId(c.req.param('id'));
    const body = (await readJsonBody(c, 16 * 1024)) as Record<string, unknown> | null;
    if (!body || typeof body !== 'object' || typeof body.name !== 'string') throw invalid('name', 'name is required');
    try {
      await renameApiKey(c.var.deps.sql, c.var.projectId, id, body.name);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'not_found') throw new ApiError('not_found', 'API key not found.');
      if (err instanceof ServiceError && err.code === 'invalid_input') throw invalid('name', err.message);
      throw err;
    }
    return c.json({ object: 'api_key', id }, 200);
  });

  app.delete('/api-keys/:id', async (c) => {
    const id = keyId(c.req.param('id'));
    try {
      await revokeApiKey(c.var.deps.sql, c.var.projectId, id);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'not_found') throw new ApiError('not_found', 'API key not found.');
      throw err;
    }
    return c.json({ object: 'api_key', id, deleted: true }, 200);
  });
}
