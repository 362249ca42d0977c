import type { Context, Hono } from 'hono';
import { ValidationError } from '../../src/http/errors.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import { broadcastCounts, listBroadcasts, type BroadcastRow } from '../../src/broadcasts/queries.ts';
import {
  cancelBroadcast, createBroadcast, requireBroadcast, sendBroadcast, updateBroadcast,
} from '../../src/broadcasts/service.ts';
import { hasUnsubscribePlaceholder, htmlFooter, renderPart, textFooter, withPreview, type RecipientContact } from '../../src/broadcasts/render.ts';
import { sendEmail } from '../../src/emails/service.ts';
import { findContact } from '../../src/contacts/service.ts';
import type { ContactRow } from '../../src/contacts/queries.ts';
import { allProperties } from '../../src/contacts/property-queries.ts';
import { listSegments } from '../../src/segments/queries.ts';
import { allTopics } from '../../src/topics/queries.ts';
import { BASE, type DashEnv } from '../env.ts';
import { BroadcastPage, BroadcastsPage, BROADCAST_COUNTS, broadcastDone, broadcastPercent, type BroadcastTyped } from '../pages/broadcasts.tsx';
import { base, errorPage, field, render } from '../render.tsx';
import { urlId } from '../params.ts';
import { progressStream } from '../live.ts';
import { problemsOf } from './contacts.tsx';
import { CAUGHT_HTML_CSP } from './inbox.tsx';

export const BROADCASTS_PER_PAGE = 50;
const COMPOSE = ['name', 'segment_id', 'topic_id', 'from', 'subject', 'preview_text', 'html', 'text'] as const;
/** What a preview or a test send links to instead of a real contact's one-click unsubscribe. */
export const SAMPLE_UNSUBSCRIBE_URL = 'https://unsubscribe.invalid/preview';

const orNull = (s: string | undefined) => (s === undefined || s.trim() === '' ? null : s);

function composed(body: Record<string, unknown>) {
  const typed = Object.fromEntries(COMPOSE.map((k) => [k, field(body, k)])) as BroadcastTyped;
  const request = {
    name: typed.name!.trim(), segment_id: typed.segment_id, topic_id: orNull(typed.topic_id), from: typed.from!.trim(),
    subject: typed.subject, preview_text: orNull(typed.preview_text), html: orNull(typed.html), text: orNull(typed.text),
  };
  return { typed, request };
}

/** A textarea's value as the browser sends it back: CRLF line ends, and no newline first (HTML drops it). */
const asSubmitted = (s: string | null) => (s ?? '').replace(/\r\n?/g, '\n').replace(/^\n/, '');

/**
 * A broadcast rendered from a template stays the template's when the edit leaves its html and text
 * as shown: only content typed over them makes it inline (as the API's update does).
 */
function keepingTemplate(request: ReturnType<typeof composed>['request'], stored: BroadcastRow) {
  if (stored.templateId === null) return request;
  if (asSubmitted(request.html) !== asSubmitted(stored.html) || asSubmitted(request.text) !== asSubmitted(stored.text)) return request;
  const { html: _html, text: _text, ...rest } = request;
  return rest;
}

async function choices(c: Context<DashEnv>) {
  const [segments, topics] = await Promise.all([
    listSegments(c.var.deps.sql, c.var.project.id, { limit: 500 }),
    allTopics(c.var.deps.sql, c.var.project.id),
  ]);
  return { segments: segments.rows, topics };
}

/** The contact a preview or test is for (`contact`, an address or id of this project), or a blank sample. */
async function previewContact(c: Context<DashEnv>, named: string) {
  const value = named.trim();
  if (!value) return { contact: undefined, error: undefined };
  const contact = await findContact(c.var.deps.sql, c.var.project.id, value);
  return { contact, error: contact ? undefined : `No contact of this project is ${value}; the preview shows a blank contact.` };
}

/** The broadcast's parts as `contact` receives them (§23.5), with a sample unsubscribe link. */
async function rendered(c: Context<DashEnv>, b: BroadcastRow, contact: ContactRow | undefined, to?: string) {
  const declared = await allProperties(c.var.deps.sql, c.var.project.id);
  const fallbacks = Object.fromEntries(declared.map((p) => [p.key, p.fallbackValue]));
  const who: RecipientContact = contact
    ? { id: contact.id, email: contact.email, firstName: contact.firstName, lastName: contact.lastName, properties: contact.properties }
    : { id: '', email: to ?? 'contact@example.com', firstName: null, lastName: null, properties: {} };
  const limit = c.var.deps.config.emailMaxMessageBytes;
  const part = (source: string | null, kind: 'subject' | 'html' | 'text') => (source === null ? null : renderPart(source, kind, who, fallbacks, SAMPLE_UNSUBSCRIBE_URL, limit));
  let html = part(b.html, 'html');
  let text = part(b.text, 'text');
  if (html !== null && !hasUnsubscribePlaceholder(b.html)) html = htmlFooter(html, SAMPLE_UNSUBSCRIBE_URL);
  if (text !== null && !hasUnsubscribePlaceholder(b.text)) text = textFooter(text, SAMPLE_UNSUBSCRIBE_URL);
  if (html !== null) html = withPreview(html, b.previewText);
  return { subject: part(b.subject, 'subject')!, html, text };
}

async function showBroadcasts(c: Context<DashEnv>, extra: { error?: string; typed?: BroadcastTyped; status?: 200 | 422 } = {}) {
  const after = c.req.method === 'GET' ? c.req.query('after') || undefined : undefined;
  if (after !== undefined && !isWellFormedId('broadcast', after)) return errorPage(c, 404, 'Not found', 'That page of broadcasts does not exist.');
  const [page, { segments, topics }] = await Promise.all([
    listBroadcasts(c.var.deps.sql, c.var.project.id, { limit: BROADCASTS_PER_PAGE, startingAfter: after }),
    choices(c),
  ]);
  return render(c, <BroadcastsPage {...base(c)} broadcasts={page.rows} segments={segments} topics={topics} hasMore={page.hasMore} isFirst={!after}
    error={extra.error} typed={extra.typed} />, extra.status ?? 200);
}

async function showBroadcast(c: Context<DashEnv>, id: string, extra: { error?: string; notice?: string; typed?: BroadcastTyped; status?: 200 | 409 | 422 } = {}) {
  const b = await requireBroadcast(c.var.deps.sql, c.var.project.id, id);
  const named = c.req.method === 'GET' ? c.req.query('contact') ?? '' : '';
  const [counts, { segments, topics }, chosen] = await Promise.all([broadcastCounts(c.var.deps.sql, b), choices(c), previewContact(c, named)]);
  const previewQuery = chosen.contact ? `?contact=${encodeURIComponent(chosen.contact.id)}` : '';
  return render(c, <BroadcastPage {...base(c)} broadcast={b} counts={counts} segments={segments} topics={topics}
    previewContact={chosen.contact} previewQuery={previewQuery} previewError={chosen.error}
    error={extra.error} notice={extra.notice} typed={extra.typed} />, extra.status ?? 200);
}

/** Broadcasts: list and compose, a broadcast's page (preview per contact, test, send or schedule, cancel, live progress). */
export function registerBroadcastRoutes(app: Hono<DashEnv>) {
  const page = (c: Context<DashEnv>, id: string) => `${BASE}/projects/${c.var.project.id}/broadcasts/${id}`;

  app.get('/projects/:projectId/broadcasts', (c) => showBroadcasts(c));

  app.post('/projects/:projectId/broadcasts', async (c) => {
    const { typed, request } = composed(await c.req.parseBody());
    try {
      const b = await createBroadcast(c.var.deps.sql, c.var.project.id, request);
      return c.redirect(page(c, b.id), 303);
    } catch (err) {
      return showBroadcasts(c, { error: problemsOf(err), typed, status: 422 });
    }
  });

  app.get('/projects/:projectId/broadcasts/:broadcastId', (c) => showBroadcast(c, urlId(c, 'broadcastId', 'broadcast')));

  app.post('/projects/:projectId/broadcasts/:broadcastId', async (c) => {
    const id = urlId(c, 'broadcastId', 'broadcast');
    const { typed, request } = composed(await c.req.parseBody());
    const stored = await requireBroadcast(c.var.deps.sql, c.var.project.id, id);
    try {
      await updateBroadcast(c.var.deps.sql, c.var.project.id, id, keepingTemplate(request, stored), undefined, stored);
    } catch (err) {
      return showBroadcast(c, id, { error: problemsOf(err), typed, status: 422 });
    }
    return c.redirect(page(c, id), 303);
  });

  /** The html as the chosen contact (`?contact=`) receives it, framed like caught mail: sandboxed, under its own CSP. */
  app.get('/projects/:projectId/broadcasts/:broadcastId/preview', async (c) => {
    const b = await requireBroadcast(c.var.deps.sql, c.var.project.id, urlId(c, 'broadcastId', 'broadcast'));
    const { contact } = await previewContact(c, c.req.query('contact') ?? '');
    const out = await rendered(c, b, contact);
    if (out.html === null) return errorPage(c, 404, 'No preview', 'This broadcast has no HTML.');
    c.header('Content-Security-Policy', CAUGHT_HTML_CSP);
    c.header('Content-Type', 'text/html; charset=utf-8');
    return c.body(out.html, 200);
  });

  /** One ordinary email to the address typed, rendered for the previewed contact; it is not the broadcast's. */
  app.post('/projects/:projectId/broadcasts/:broadcastId/test', async (c) => {
    const id = urlId(c, 'broadcastId', 'broadcast');
    const body = await c.req.parseBody();
    const b = await requireBroadcast(c.var.deps.sql, c.var.project.id, id);
    const to = field(body, 'to').trim();
    const { contact } = await previewContact(c, field(body, 'contact'));
    try {
      const out = await rendered(c, b, contact, to);
      const sent = await sendEmail(c.var.deps, c.var.project.id, undefined, {
        from: b.fromAddress, to: [to], subject: `[Test] ${out.subject}`, ...(out.html === null ? {} : { html: out.html }), ...(out.text === null ? {} : { text: out.text }),
      });
      return showBroadcast(c, id, { notice: `Test sent to ${to}: email ${sent.id}.` });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      return showBroadcast(c, id, { error: problemsOf(err), status: 422 });
    }
  });

  app.post('/projects/:projectId/broadcasts/:broadcastId/send', async (c) => {
    const id = urlId(c, 'broadcastId', 'broadcast');
    const when = field(await c.req.parseBody(), 'scheduled_at').trim();
    try {
      await sendBroadcast(c.var.deps.config, c.var.deps.sql, c.var.project.id, id, when ? { scheduled_at: when } : {});
    } catch (err) {
      return showBroadcast(c, id, { error: problemsOf(err), status: 422 });
    }
    return c.redirect(page(c, id), 303);
  });

  app.post('/projects/:projectId/broadcasts/:broadcastId/cancel', async (c) => {
    const id = urlId(c, 'broadcastId', 'broadcast');
    try {
      await cancelBroadcast(c.var.deps.sql, c.var.project.id, id);
    } catch (err) {
      return showBroadcast(c, id, { error: problemsOf(err), status: 409 });
    }
    return c.redirect(page(c, id), 303);
  });

  app.get('/projects/:projectId/broadcasts/:broadcastId/live', async (c) => {
    const { sql } = c.var.deps;
    const projectId = c.var.project.id;
    const id = urlId(c, 'broadcastId', 'broadcast');
    await requireBroadcast(sql, projectId, id);
    return progressStream(c, `broadcast:${id}`, async () => {
      const b = await requireBroadcast(sql, projectId, id).catch(() => undefined);
      if (!b) return undefined;
      const counts = await broadcastCounts(sql, b);
      return {
        status: b.status, percent: broadcastPercent(b, counts), done: broadcastDone(b, counts),
        counts: Object.fromEntries(BROADCAST_COUNTS.map((k) => [k, counts[k]])),
      };
    });
  });
}
