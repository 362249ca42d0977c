import type { Hono } from 'hono';
import { getEmail, listEmails } from '../../src/emails/queries.ts';
import { EMAIL_STATUSES, type EmailStatus } from '../../src/emails/schemas.ts';
import { parseTagFilter } from '../../src/emails/validate.ts';
import { storedAddress } from '../../src/suppressions/address.ts';
import { listEventsOfEmail } from '../../src/events/queries.ts';
import { findSinkMessageOfEmail } from '../../src/sink/store.ts';
import { listDeliveriesOfEmail } from '../../src/webhooks/queries.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import type { DashEnv } from '../env.ts';
import { EmailPage, EmailsPage } from '../pages/emails.tsx';
import { base, errorPage, render } from '../render.tsx';
import { urlId } from '../params.ts';

export const EMAILS_PER_PAGE = 50;

/** The email log with paging and the recipient, status and tag filters, and each email's own page. */
export function registerEmailRoutes(app: Hono<DashEnv>) {
  app.get('/projects/:projectId/emails', async (c) => {
    const status = c.req.query('status') || undefined;
    const tag = c.req.query('tag')?.trim() || undefined;
    const after = c.req.query('after') || undefined;
    const to = c.req.query('to')?.trim() || undefined;
    const filters = { status, tag, to };
    const errors: string[] = [];
    if (status && !EMAIL_STATUSES.includes(status as EmailStatus)) errors.push(`There is no status "${status}".`);
    const tagFilter = tag ? parseTagFilter(tag) : undefined;
    if (tag && !tagFilter) errors.push('A tag filter is name:value, each of letters, digits, _ and -.');
    const address = to === undefined ? undefined : storedAddress(to);
    if (to && !address) errors.push('A recipient is an email address, such as ann@example.net.');
    if (after && !isWellFormedId('email', after)) return errorPage(c, 404, 'Not found', 'That page of emails does not exist.');
    if (errors.length) {
      return render(c, <EmailsPage {...base(c)} emails={[]} hasMore={false} isFirst filters={filters} error={errors.join(' ')} />, 422);
    }
    const page = await listEmails(c.var.deps.sql, c.var.project.id, {
      limit: EMAILS_PER_PAGE, startingAfter: after, status: status as EmailStatus | undefined, tag: tagFilter, to: address,
    });
    return render(c, <EmailsPage {...base(c)} emails={page.rows} hasMore={page.hasMore} isFirst={!after} filters={filters} />);
  });

  app.get('/projects/:projectId/emails/:emailId', async (c) => {
    const { sql } = c.var.deps;
    const projectId = c.var.project.id;
    const emailId = urlId(c, 'emailId', 'email');
    const message = await getEmail(sql, projectId, emailId);
    if (!message) return errorPage(c, 404, 'Not found', 'There is no such email in this project.');
    const [events, deliveries, caughtMessageId] = await Promise.all([
      listEventsOfEmail(sql, projectId, emailId),
      listDeliveriesOfEmail(sql, projectId, emailId),
      findSinkMessageOfEmail(sql, projectId, emailId),
    ]);
    return render(c, <EmailPage {...base(c)} message={message} events={events} deliveries={deliveries} caughtMessageId={caughtMessageId} />);
  });
}
