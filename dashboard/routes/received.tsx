import type { Hono } from 'hono';
import { getReceived, listReceived } from '../../src/inbound/queries.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import type { DashEnv } from '../env.ts';
import { ReceivedEmailPage, ReceivedPage } from '../pages/received.tsx';
import { base, errorPage, render } from '../render.tsx';
import { urlId } from '../params.ts';
import { CAUGHT_HTML_CSP } from './inbox.tsx';

const PER_PAGE = 50;

/** The Received page (§20.7): read only, for every role. */
export function registerReceivedRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId/received', async (c) => {
    const after = c.req.query('after') || undefined;
    if (after && !isWellFormedId('received', after)) return errorPage(c, 404, 'Not found', 'That page of received mail does not exist.');
    const page = await listReceived(c.var.deps.sql, c.var.project.id, { limit: PER_PAGE, startingAfter: after });
    return render(c, <ReceivedPage {...base(c)} emails={page.rows} hasMore={page.hasMore} isFirst={!after} />);
  });

  app.get('/projects/:projectId/received/:receivedId', async (c) => {
    const received = await getReceived(c.var.deps.sql, c.var.project.id, urlId(c, 'receivedId', 'received'));
    if (!received) return errorPage(c, 404, 'Not found', 'There is no such received email.');
    return render(c, <ReceivedEmailPage {...base(c)} received={received} />);
  });

  // The sender's HTML, for the sandboxed iframe only, under the inbox's policy.
  app.get('/projects/:projectId/received/:receivedId/html', async (c) => {
    const received = await getReceived(c.var.deps.sql, c.var.project.id, urlId(c, 'receivedId', 'received'));
    if (!received || received.html === null) return errorPage(c, 404, 'Not found', 'This email has no HTML part.');
    c.header('Content-Security-Policy', CAUGHT_HTML_CSP);
    c.header('Content-Type', 'text/html; charset=utf-8');
    return c.body(received.html, 200);
  });
}
