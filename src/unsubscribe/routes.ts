import type { Context, Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import type { Sql } from '../platform/db.ts';
import { addSuppressions } from '../suppressions/queries.ts';
import { verifyContactToken, verifyUnsubscribeToken, type ContactUnsubscribeTarget } from './token.ts';
import { confirmPage, donePage, gonePage, invalidPage, PAGE_HEADERS, preferencesPage, preferencesSavedPage } from './page.ts';
import { readBoundedBody } from '../http/body.ts';
import { contactPreferences, setContactTopics, unsubscribeContact } from './contact.ts';

/** A form body: the one-click field, or the preferences page's few fields. */
const FORM_LIMIT = 16 * 1024;

async function emailRecipients(sql: Sql, projectId: string, emailId: string) {
  const [row] = await sql<[{ toAddresses: string[]; ccAddresses: string[]; bccAddresses: string[] }?]>`
    select to_addresses, cc_addresses, bcc_addresses from emails
    where id = ${emailId} and project_id = ${projectId}`;
  return row ? [...row.toAddresses, ...row.ccAddresses, ...row.bccAddresses] : undefined;
}

/**
 * The target of `List-Unsubscribe`. Outside /v1: the signed token is the only credential, so
 * these routes take no API key and stay out of the OpenAPI document.
 */
export function registerUnsubscribeRoutes(app: Hono<AppEnv>) {
  const page = (c: Context<AppEnv>, body: ReturnType<typeof confirmPage>, status: 200 | 400 | 404) => {
    for (const [name, value] of Object.entries(PAGE_HEADERS)) c.header(name, value);
    return c.html(body, status);
  };

  /** A broadcast recipient's link: the preferences page, and its forms (one-click included). */
  const contactGet = async (c: Context<AppEnv>, target: ContactUnsubscribeTarget) => {
    const prefs = await contactPreferences(c.var.deps.sql, target.projectId, target.contactId);
    if (!prefs) return page(c, gonePage(), 404);
    const [topic] = target.topicId
      ? await c.var.deps.sql<[{ id: string; name: string }?]>`select id, name from topics where id = ${target.topicId} and project_id = ${target.projectId}`
      : [];
    return page(c, preferencesPage({ email: prefs.email, unsubscribed: prefs.unsubscribed, topic: topic ?? null, topics: prefs.topics }), 200);
  };
  const contactPost = async (c: Context<AppEnv>, target: ContactUnsubscribeTarget) => {
    const { sql, log } = c.var.deps;
    const form = new URLSearchParams((await readBoundedBody(c, FORM_LIMIT)).toString('utf8'));
    const action = form.get('action');
    let found: boolean;
    if (action === 'save') {
      const prefs = await contactPreferences(sql, target.projectId, target.contactId);
      if (!prefs) return page(c, gonePage(), 404);
      // Only the public topics the page showed; a private one is never changed from here.
      const chosen = new Set(form.getAll('topic'));
      found = await setContactTopics(sql, target.projectId, target.contactId,
        prefs.topics.map((t) => ({ topicId: t.id, subscription: chosen.has(t.id) ? 'opt_in' as const : 'opt_out' as const })));
      if (found) return page(c, preferencesSavedPage(), 200);
    } else if (action !== 'all' && target.topicId) {
      // RFC 8058 one-click (and the page's own button): out of the topic the email came under.
      found = await setContactTopics(sql, target.projectId, target.contactId, [{ topicId: target.topicId, subscription: 'opt_out' }]);
    } else {
      found = await unsubscribeContact(sql, target.projectId, target.contactId);
    }
    if (!found) return page(c, gonePage(), 404);
    log.info({ projectId: target.projectId, contactId: target.contactId, topicId: action === 'all' ? null : target.topicId }, 'contact unsubscribed');
    return page(c, donePage(), 200);
  };

  // GET only shows a page: link scanners and previews fetch URLs, and must not unsubscribe anyone.
  app.get('/unsubscribe/:token', async (c) => {
    const contact = verifyContactToken(c.var.deps.config.secretKey, c.req.param('token'));
    if (contact) return contactGet(c, contact);
    const target = verifyUnsubscribeToken(c.var.deps.config.secretKey, c.req.param('token'));
    if (!target) return page(c, invalidPage(), 400);
    return page(c, confirmPage(), 200);
  });

  // RFC 8058 one-click (`List-Unsubscribe=One-Click`) and the confirm form post here alike.
  app.post('/unsubscribe/:token', async (c) => {
    const { config, sql, log } = c.var.deps;
    const contact = verifyContactToken(config.secretKey, c.req.param('token'));
    if (contact) return contactPost(c, contact);
    const target = verifyUnsubscribeToken(config.secretKey, c.req.param('token'));
    if (!target) return page(c, invalidPage(), 400);
    const recipients = await emailRecipients(sql, target.projectId, target.emailId);
    if (!recipients) return page(c, gonePage(), 404);
    // The token's own recipient, and only while the email names that address. A token minted
    // before tokens named one speaks for the email's recipient only when it had just one.
    const address = target.recipient ?? (recipients.length === 1 ? recipients[0] : undefined);
    if (address === undefined || !recipients.includes(address)) return page(c, invalidPage(), 400);
    const added = await addSuppressions(sql, target.projectId, [address], 'unsubscribed', target.emailId);
    log.info({ projectId: target.projectId, emailId: target.emailId, added }, 'recipients unsubscribed');
    return page(c, donePage(), 200);
  });
}
