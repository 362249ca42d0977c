import type { Task } from 'graphile-worker';
import { z } from 'zod';
import type { WorkerDeps } from '../interfaces.ts';
import type { Sql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { insertQueuedEmails, type NewEmail } from '../emails/queries.ts';
import { normaliseAddress } from '../suppressions/address.ts';
import { suppressedAmong } from '../suppressions/queries.ts';
import { withDayPartitions } from '../retention/partitions.ts';
import { isPaused } from '../reputation/queries.ts';
import * as q from './queries.ts';
import type { BroadcastRow, PageContact } from './queries.ts';
import { BroadcastTooLarge, hasUnsubscribePlaceholder, htmlFooter, renderPart, textFooter, withPreview, type PropertyFallbacks } from './render.ts';
import { contactUnsubscribeUrl, oneClickHeaders } from './unsubscribe-url.ts';

/** Contacts read per page: the most of a broadcast's recipients any process holds at once. */
export const BROADCAST_PAGE_SIZE = 500;
/**
 * The first page is smaller: its copies are made, committed and start to leave while the pages
 * after it are made, so how soon a broadcast starts sending does not grow with a page's rendering.
 */
export const BROADCAST_FIRST_PAGE_SIZE = 50;
/**
 * A broadcast's emails queued or sending at once, at most: the next page waits until its sends
 * are this far down. Pausing or canceling then touches at most this many, and no backlog of a
 * broadcast ever sits in the queue (transactional mail goes first anyway, by priority).
 */
export const BROADCAST_MAX_AHEAD = 2 * BROADCAST_PAGE_SIZE;
/** How soon a broadcast waiting for its sends looks again; while its project is paused (§19), less often. */
const RECHECK_MS = 100;
const PAUSED_RECHECK_MS = 2000;

const Payload = z.object({ broadcast_id: z.string().min(1).max(100), project_id: z.string().min(1).max(100) });

async function propertyFallbacks(sql: Sql, projectId: string): Promise<PropertyFallbacks> {
  const rows = await sql<{ key: string; fallbackValue: string | number | null }[]>`
    select key, fallback_value from contact_properties where project_id = ${projectId}`;
  return Object.fromEntries(rows.map((r) => [r.key, r.fallbackValue]));
}

/** One recipient's email: its content personalised, its unsubscribe link and RFC 8058 headers. */
function personalise(deps: WorkerDeps, b: BroadcastRow, contact: PageContact, fallbacks: PropertyFallbacks): NewEmail {
  const { config } = deps;
  const url = contactUnsubscribeUrl(config, { projectId: b.projectId, contactId: contact.id, topicId: b.topicId })!;
  const limit = config.emailMaxMessageBytes;
  const render = (source: string | null, kind: 'subject' | 'html' | 'text') => (source === null ? null : renderPart(source, kind, contact, fallbacks, url, limit));
  let html = render(b.html, 'html');
  let text = render(b.text, 'text');
  // A visible link in every part that has none of its own (§23.5).
  if (html !== null && !hasUnsubscribePlaceholder(b.html)) html = htmlFooter(html, url);
  if (text !== null && !hasUnsubscribePlaceholder(b.text)) text = textFooter(text, url);
  if (html !== null) html = withPreview(html, b.previewText);
  return {
    id: newId('email'),
    projectId: b.projectId,
    from: b.fromAddress,
    to: [contact.email],
    cc: [],
    bcc: [],
    replyTo: b.replyToAddresses,
    subject: render(b.subject, 'subject')!,
    html,
    text,
    headers: oneClickHeaders(url),
    attachments: [],
    broadcastId: b.id,
  };
}

/**
 * `broadcast__send`: one page of a sending broadcast per run. The page's emails (with their jobs),
 * its recipients' rows and the cursor commit in one transaction, then the task enqueues itself
 * again; a run that dies commits nothing and the next continues from the cursor, so no recipient
 * is lost or given a second email. Safe to run twice: the page is made under the broadcast's row
 * lock, from the cursor read under it.
 */
export function broadcastSendTask(deps: WorkerDeps): Task {
  return async (payload) => {
    const { broadcast_id: id, project_id: projectId } = Payload.parse(payload);
    const { sql, log } = deps;
    const again = (ms: number) => sql`select ${q.broadcastJob(sql, id, projectId, sql`now() + ${ms} * interval '1 millisecond'`)}`;
    let b = await q.getBroadcast(sql, projectId, id);
    if (b?.status === 'scheduled') {
      await sql.begin((tx) => q.beginDue(tx, projectId, id));
      b = await q.getBroadcast(sql, projectId, id);
    }
    if (!b || b.status !== 'sending') return;
    if (b.pagedAt) {
      if (await q.unsentCount(sql, projectId, id, 1) === 0) {
        await q.markBroadcastSent(sql, projectId, id);
        log.info({ broadcastId: id, projectId, recipients: b.recipients }, 'broadcast sent');
      } else {
        await again(await isPaused(sql, projectId) ? PAUSED_RECHECK_MS : RECHECK_MS);
      }
      return;
    }
    if (await q.unsentCount(sql, projectId, id, BROADCAST_MAX_AHEAD) > BROADCAST_MAX_AHEAD - BROADCAST_PAGE_SIZE) {
      await again(await isPaused(sql, projectId) ? PAUSED_RECHECK_MS : RECHECK_MS);
      return;
    }
    const fallbacks = await propertyFallbacks(sql, projectId);
    await withDayPartitions(sql, [newId('email')], () => sql.begin(async (tx) => {
      const locked = await q.getBroadcast(tx, projectId, id, true);
      // Another run made this page meanwhile, or the broadcast was canceled.
      if (!locked || locked.status !== 'sending' || locked.cursor !== b.cursor || locked.pagedAt) return;
      const size = locked.cursor === null ? BROADCAST_FIRST_PAGE_SIZE : BROADCAST_PAGE_SIZE;
      const page = await q.nextPage(tx, locked, size);
      const receiving = page.filter((c) => c.receives);
      const suppressed = await suppressedAmong(tx, projectId, receiving.map((c) => c.email));
      const emails: NewEmail[] = [];
      const rows: Parameters<typeof q.insertRecipients>[1] = [];
      let skipped = 0;
      let tooLarge = 0;
      for (const contact of receiving) {
        const row = { broadcastId: id, contactId: contact.id, projectId, email: contact.email, emailId: null as string | null, skipped: null as string | null };
        if (suppressed.has(normaliseAddress(contact.email))) {
          row.skipped = 'suppressed';
          skipped++;
        } else {
          try {
            const email = personalise(deps, locked, contact, fallbacks);
            emails.push(email);
            row.emailId = email.id;
          } catch (err) {
            if (!(err instanceof BroadcastTooLarge)) throw err;
            row.skipped = 'too_large';
            tooLarge++;
            log.warn({ broadcastId: id, contactId: contact.id }, 'broadcast recipient skipped: personalised message over the limit');
          }
        }
        rows.push(row);
      }
      await insertQueuedEmails(tx, emails);
      await q.insertRecipients(tx, rows);
      const done = page.length < size;
      // A copy too large to send is a recipient it failed for: counted in `recipients` and `failed`.
      await q.advance(tx, locked, page.at(-1)?.id ?? locked.cursor, { queued: emails.length, tooLarge, suppressed: skipped }, done);
      await tx`select ${q.broadcastJob(tx, id, projectId, tx`now()`)}`;
    }));
  };
}
