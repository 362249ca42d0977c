import type { Context, Hono } from 'hono';
import type { AppEnv } from '../http/context.ts';
import type { Sql } from '../platform/db.ts';
import { addSuppressions } from '../suppressions/queries.ts';
import { verifyUnsubscribeToken } from './token.ts';
import { confirmPage, donePage, gonePage, invalidPage, PAGE_HEADERS } from './page.ts';

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

  // GET only shows a confirm button: link scanners and previews fetch URLs, and must not unsubscribe anyone.
  app.get('/unsubscribe/:token', async (c) => {
    const target = verifyUnsubscribeToken(c.var.deps.config.secretKey, c.req.param('token'));
    if (!target) return page(c, invalidPage(), 400);
    return page(c, confirmPage(), 200);
  });

  // RFC 8058 one-click (`List-Unsubscribe=One-Click`) and the confirm form post here alike.
  app.post('/unsubscribe/:token', async (c) => {
    const { config, sql, log } = c.var.deps;
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
