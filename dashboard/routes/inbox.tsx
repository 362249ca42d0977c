import type { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { deleteSinkMessages, getSinkMessage, listSinkMessages, listSinkMessagesAfter } from '../../src/sink/store.ts';
import type { SinkMessageSummaryRow } from '../../src/sink/schemas.ts';
import { sinkFeedFor } from '../../src/sink/live.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import { BASE, type DashEnv } from '../env.ts';
import { InboxPage, MessagePage } from '../pages/inbox.tsx';
import { when } from '../layout.tsx';
import { base, errorPage, render } from '../render.tsx';
import { urlId } from '../params.ts';
import { sessionStands } from '../session.ts';

export const INBOX_PER_PAGE = 50;
const LIVE_BATCH = 50;
const KEEP_ALIVE_MS = 20_000;
/**
 * How often an open stream checks that its session still stands: a member removed, or whose role
 * changed (either ends their sessions), or signed out, stops receiving within 10 s (§22.10).
 */
const ACCESS_CHECK_MS = 4_000;

/** What the live inbox's script needs to draw a row like the server's own. */
function liveRow(m: SinkMessageSummaryRow, inbox: string) {
  return {
    id: m.id,
    receivedAt: when(m.receivedAt),
    from: m.fromAddress,
    to: m.toAddresses.join(', '),
    subject: m.subject,
    size: m.sizeBytes,
    href: `${inbox}/${m.id}`,
  };
}

/**
 * The caught HTML's own policy: no script, no network, and `sandbox` so even a top-level visit
 * to this URL runs in an opaque origin without the dashboard's cookies' reach.
 */
export const CAUGHT_HTML_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox";

export function registerInboxRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId/inbox', async (c) => {
    const search = c.req.query('q')?.trim().slice(0, 200) || undefined;
    const after = c.req.query('after') || undefined;
    if (after && !isWellFormedId('sinkMessage', after)) return errorPage(c, 404, 'Not found', 'That page of the inbox does not exist.');
    const page = await listSinkMessages(c.var.deps.sql, c.var.project.id, { limit: INBOX_PER_PAGE, startingAfter: after, search });
    return render(c, <InboxPage {...base(c)} messages={page.rows} hasMore={page.hasMore} isFirst={!after} search={search} />);
  });

  /**
   * Server-sent events: each message caught after `after` (or after the stream's Last-Event-ID
   * when the browser reconnects) as a `caught` event whose id is the message id. Without
   * `after`, every message in the sink counts as new: the page it came from was empty.
   */
  app.get('/projects/:projectId/inbox/live', async (c) => {
    const { sql, log } = c.var.deps;
    const projectId = c.var.project.id;
    const from = c.req.header('last-event-id') || c.req.query('after') || '';
    if (from && !isWellFormedId('sinkMessage', from)) return errorPage(c, 404, 'Not found', 'There is no such message in this inbox.');
    const inbox = `${BASE}/projects/${projectId}/inbox`;

    let dirty = true; // one read at the start covers anything caught since the page was drawn
    let ended = false;
    let wake: (() => void) | undefined;
    const kick = () => { dirty = true; wake?.(); };
    const end = () => { ended = true; wake?.(); };
    const unsubscribe = await sinkFeedFor(sql).subscribe(projectId, kick, end).catch((err: unknown) => {
      log.warn({ err }, 'live inbox could not listen');
      return undefined;
    });
    if (!unsubscribe) {
      c.header('Retry-After', '30');
      return c.text('Live updates are not available right now; reload the page to see new mail.', 503);
    }
    c.header('X-Accel-Buffering', 'no');
    return streamSSE(c, async (stream) => {
      stream.onAbort(end);
      const keepAlive = setInterval(() => { stream.write(': keep-alive\n\n').catch(end); }, KEEP_ALIVE_MS);
      const sessionId = c.var.session?.id;
      const access = setInterval(() => {
        if (!sessionId) return end();
        sessionStands(sql, sessionId).then((stands) => { if (!stands) end(); }, () => {});
      }, ACCESS_CHECK_MS);
      let cursor = from;
      try {
        await stream.write('retry: 3000\n\n');
        while (!ended) {
          if (!dirty) {
            await new Promise<void>((resolve) => { wake = resolve; });
            wake = undefined;
            continue;
          }
          dirty = false;
          const rows = await listSinkMessagesAfter(sql, projectId, cursor, LIVE_BATCH);
          for (const m of rows) {
            await stream.writeSSE({ event: 'caught', id: m.id, data: JSON.stringify(liveRow(m, inbox)) });
            cursor = m.id;
          }
          if (rows.length === LIVE_BATCH) dirty = true;
        }
      } catch (err) {
        // The browser reconnects with its Last-Event-ID and picks up where this left off.
        log.warn({ err }, 'live inbox stream ended');
      } finally {
        clearInterval(keepAlive);
        clearInterval(access);
        unsubscribe();
      }
    });
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
