import type { Hono } from 'hono';
import { deleteSinkMessages, getSinkMessage, listSinkMessages } from '../../src/sink/store.ts';
import { BASE, type DashEnv } from '../env.ts';
import { InboxPage, MessagePage } from '../pages/inbox.tsx';
import { base, errorPage, render } from '../render.tsx';
import { urlId } from '../params.ts';

/**
 * The caught HTML's own policy: no script, no network, and `sandbox` so even a top-level visit
 * to this URL runs in an opaque origin without the dashboard's cookies' reach.
 */
export const CAUGHT_HTML_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox";

export function registerInboxRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId/inbox', async (c) => {
    const page = await listSinkMessages(c.var.deps.sql, c.var.project.id, { limit: 100 });
    return render(c, <InboxPage {...base(c)} messages={page.rows} hasMore={page.hasMore} />);
  });

  app.post('/projects/:projectId/inbox/clear', async (c) => {
    await deleteSinkMessages(c.var.deps.sql, c.var.project.id);
    return c.redirect(`${BASE}/projects/${c.var.project.id}/inbox`, 303);
  });

  app.get('/projects/:projectId/inbox/:messageId', async (c) => {
    const message = await getSinkMessage(c.var.deps.sql, c.var.project.id, urlId(c, 'messageId', 'sinkMessage'));
    if (!message) return errorPage(c, 404, 'Not found', 'There is no such message in this inbox.');
    return render(c, <MessagePage {...base(c)} message={message} />);
  });

  app.get('/projects/:projectId/inbox/:messageId/html', async (c) => {
    const message = await getSinkMessage(c.var.deps.sql, c.var.project.id, urlId(c, 'messageId', 'sinkMessage'));
    if (!message || message.html === null) return errorPage(c, 404, 'Not found', 'This message has no HTML part.');
    c.header('Content-Security-Policy', CAUGHT_HTML_CSP);
    c.header('Content-Type', 'text/html; charset=utf-8');
    return c.body(message.html, 200);
  });
}
