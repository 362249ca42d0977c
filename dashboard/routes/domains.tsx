import type { Hono } from 'hono';
import { listDomains } from '../../src/domains/queries.ts';
import { addDomain, checkDomain, deleteDomain, updateDomainTracking } from '../../src/domains/service.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { BASE, type DashEnv } from '../env.ts';
import { DomainsPage } from '../pages/domains.tsx';
import { base, field, render } from '../render.tsx';
import { urlId } from '../params.ts';

/** Domains: statuses and DNS records, added and checked through the domain service. */
export function registerDomainRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId/domains', async (c) => {
    const domains = await listDomains(c.var.deps.sql, c.var.project.id);
    return render(c, <DomainsPage {...base(c)} domains={domains} />);
  });

  app.post('/projects/:projectId/domains', async (c) => {
    const { sql, config } = c.var.deps;
    try {
      await addDomain(sql, config, c.var.project.id, field(await c.req.parseBody(), 'domain'));
      return c.redirect(`${BASE}/projects/${c.var.project.id}/domains`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const domains = await listDomains(sql, c.var.project.id);
      return render(c, <DomainsPage {...base(c)} domains={domains} error={err.message} />, 422);
    }
  });

  // A form sends every field: unchecked boxes are off, an empty host clears the tracking domain.
  app.post('/projects/:projectId/domains/:domainId/tracking', async (c) => {
    const { sql, config } = c.var.deps;
    const domainId = urlId(c, 'domainId', 'domain');
    const body = await c.req.parseBody();
    try {
      await updateDomainTracking(sql, config, c.var.project.id, domainId, {
        openTracking: field(body, 'open_tracking') === 'on',
        clickTracking: field(body, 'click_tracking') === 'on',
        trackingDomain: field(body, 'tracking_domain').trim() || null,
      });
      return c.redirect(`${BASE}/projects/${c.var.project.id}/domains`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError) || err.code === 'not_found') throw err;
      const domains = await listDomains(sql, c.var.project.id);
      return render(c, <DomainsPage {...base(c)} domains={domains} trackingError={{ domainId, message: err.message }} />, 422);
    }
  });

  app.post('/projects/:projectId/domains/:domainId/check', async (c) => {
    await checkDomain(c.var.deps.sql, c.var.deps.config, c.var.project.id, urlId(c, 'domainId', 'domain'));
    return c.redirect(`${BASE}/projects/${c.var.project.id}/domains`, 303);
  });

  // Not found and receiving-on come back as ServiceErrors: the 404 or 409 page with the message.
  app.post('/projects/:projectId/domains/:domainId/delete', async (c) => {
    await deleteDomain(c.var.deps.sql, c.var.project.id, urlId(c, 'domainId', 'domain'));
    return c.redirect(`${BASE}/projects/${c.var.project.id}/domains`, 303);
  });
}
