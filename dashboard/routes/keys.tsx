import type { Hono } from 'hono';
import { listKeys } from '../../src/keys/queries.ts';
import { createApiKey, revokeApiKey } from '../../src/keys/service.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { BASE, type DashEnv } from '../env.ts';
import { KeyCreatedPage, KeysPage } from '../pages/keys.tsx';
import { base, field, render } from '../render.tsx';
import { urlId } from '../params.ts';

export function registerKeyRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId/keys', async (c) => {
    const keys = await listKeys(c.var.deps.sql, c.var.project.id);
    return render(c, <KeysPage {...base(c)} keys={keys} />);
  });

  app.post('/projects/:projectId/keys', async (c) => {
    const { sql } = c.var.deps;
    const body = await c.req.parseBody();
    try {
      const created = await createApiKey(sql, c.var.project.id, field(body, 'name'), field(body, 'permission') || 'full');
      // Shown in this response only; never stored, never in a URL.
      return render(c, <KeyCreatedPage {...base(c)} name={created.name} apiKey={created.key} />);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const keys = await listKeys(sql, c.var.project.id);
      return render(c, <KeysPage {...base(c)} keys={keys} error={err.message} />, 422);
    }
  });

  app.post('/projects/:projectId/keys/:keyId/revoke', async (c) => {
    await revokeApiKey(c.var.deps.sql, c.var.project.id, urlId(c, 'keyId', 'key'));
    return c.redirect(`${BASE}/projects/${c.var.project.id}/keys`, 303);
  });
}
