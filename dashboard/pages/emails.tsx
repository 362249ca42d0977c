import { EMAIL_STATUSES, type EmailRow, type EmailWithBodies } from '../../src/emails/schemas.ts';
import type { EventRow } from '../../src/events/queries.ts';
import type { Project } from '../../src/projects/service.ts';
import type { DeliveryRow } from '../../src/webhooks/schemas.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Layout, Pager, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

const tagText = (tags: EmailRow['tags']) => tags.map((t) => `${t.name}:${t.value}`).join(' ');

export function EmailsPage(props: Base & {
  emails: EmailRow[];
  hasMore: boolean;
  isFirst: boolean;
  filters: { status?: string; tag?: string; to?: string };
  error?: string;
}) {
  const p = `${BASE}/projects/${props.project.id}/emails`;
  return (
    <Layout title="Emails" csrf={props.csrf} email={props.email} project={props.project}>
      <form class="filters" method="get" action={p}>
        <label>Recipient (to, cc or bcc)
          <input type="search" name="to" value={props.filters.to ?? ''} placeholder="ann@example.net" maxlength={320} />
        </label>
        <label>Status
          <select name="status">
            <option value="">any</option>
            {EMAIL_STATUSES.map((s) => <option value={s} selected={props.filters.status === s}>{s}</option>)}
          </select>
        </label>
        <label>Tag (name:value)
          <input type="text" name="tag" value={props.filters.tag ?? ''} placeholder="category:welcome" maxlength={600} />
        </label>
        <button type="submit">Filter</button>
        {(props.filters.status || props.filters.tag || props.filters.to) && <a href={p}>Clear filters</a>}
      </form>
      <ErrorNote message={props.error} />
      <table id="emails">
        <thead><tr><th>Created</th><th>Subject</th><th>From</th><th>To</th><th>Status</th><th>Tags</th><th>Last error</th></tr></thead>
        <tbody>
          {props.emails.map((e) => (
            <tr>
              <td>{when(e.createdAt)}</td>
              <td><a href={`${p}/${e.id}`}>{e.subject || '(no subject)'}</a></td>
              <td>{e.fromAddress}</td>
              <td>{e.toAddresses.join(', ')}</td>
              <td class={`status-${e.status}`}>{e.status}</td>
              <td>{tagText(e.tags)}</td>
              <td>{e.lastError ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.emails.length === 0 && <p class="muted">{props.isFirst ? 'No emails match.' : 'No older emails.'}</p>}
      <Pager path={p} query={props.filters} lastId={props.emails.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
    </Layout>
  );
}

export type EmailDelivery = DeliveryRow & { eventType: string; endpointId: string; endpointUrl: string };

/** One email: what was sent, what happened to it, and what its webhooks were told. */
export function EmailPage(props: Base & {
  message: EmailWithBodies;
  events: EventRow[];
  deliveries: EmailDelivery[];
  caughtMessageId?: string;
}) {
  const e = props.message;
  const p = `${BASE}/projects/${props.project.id}`;
  return (
    <Layout title={e.subject || '(no subject)'} csrf={props.csrf} email={props.email} project={props.project}>
      <table id="email-fields">
        <tbody>
          <tr><th>Id</th><td><code>{e.id}</code></td></tr>
          <tr><th>Status</th><td id="email-status" class={`status-${e.status}`}>{e.status}</td></tr>
          <tr><th>From</th><td>{e.fromAddress}</td></tr>
          <tr><th>To</th><td>{e.toAddresses.join(', ')}</td></tr>
          {e.ccAddresses.length > 0 && <tr><th>Cc</th><td>{e.ccAddresses.join(', ')}</td></tr>}
          {e.replyToAddresses.length > 0 && <tr><th>Reply-To</th><td>{e.replyToAddresses.join(', ')}</td></tr>}
          <tr><th>Created</th><td>{when(e.createdAt)}</td></tr>
          {e.scheduledAt && <tr><th>Scheduled for</th><td>{when(e.scheduledAt)}</td></tr>}
          <tr><th>Sent</th><td>{when(e.sentAt)}</td></tr>
          <tr><th>Delivered</th><td>{when(e.deliveredAt)}</td></tr>
          <tr><th>Opened</th><td id="email-opened">{engagement(props.events, 'email.opened', e.openedAt)}</td></tr>
          <tr><th>Clicked</th><td id="email-clicked">{engagement(props.events, 'email.clicked', e.clickedAt)}</td></tr>
          <tr><th>Provider message id</th><td>{e.providerMessageId ? <code>{e.providerMessageId}</code> : '—'}</td></tr>
          {e.lastError && <tr><th>Last error</th><td>{e.lastError}</td></tr>}
          {e.tags.length > 0 && <tr><th>Tags</th><td>{tagText(e.tags)}</td></tr>}
          {e.templateId && (
            <tr><th>Template</th><td><a id="template-link" href={`${p}/templates/${e.templateId}`}><code>{e.templateId}</code></a> version {e.templateVersion}</td></tr>
          )}
          <tr>
            <th>Caught copy</th>
            <td>{props.caughtMessageId
              ? <a id="caught-link" href={`${p}/inbox/${props.caughtMessageId}`}>Open in the inbox</a>
              : <span class="muted">None: this email went to a provider, has not been sent yet, or was pruned from the sink.</span>}
            </td>
          </tr>
        </tbody>
      </table>

      <h2>Timeline</h2>
      {props.events.length === 0 ? <p class="muted">No events yet.</p> : (
        <table id="timeline">
          <thead><tr><th>When</th><th>Event</th><th>Details</th></tr></thead>
          <tbody>
            {props.events.map((ev) => (
              <tr>
                <td>{when(ev.createdAt)}</td>
                <td>{ev.type}</td>
                <td><code>{eventDetails(ev.data)}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      {clicksByLink(props.events).length > 0 && (
        <>
          <h2>Clicks by link</h2>
          <table id="clicks-by-link">
            <thead><tr><th>Link</th><th>Clicks</th><th>By machines</th></tr></thead>
            <tbody>
              {clicksByLink(props.events).map((l) => <tr><td><code>{l.link}</code></td><td>{l.clicks}</td><td>{l.machine}</td></tr>)}
            </tbody>
          </table>
        </>
      )}

      <h2>Webhook deliveries</h2>
      {props.deliveries.length === 0 ? <p class="muted">No webhook deliveries for this email.</p> : (
        <table id="email-deliveries">
          <thead><tr><th>Created</th><th>Event</th><th>Endpoint</th><th>Status</th><th>Attempts</th><th>Response</th><th>Error</th></tr></thead>
          <tbody>
            {props.deliveries.map((d) => (
              <tr>
                <td>{when(d.createdAt)}</td>
                <td>{d.eventType}</td>
                <td><a href={`${p}/webhooks/${d.endpointId}/deliveries`}>{d.endpointUrl}</a></td>
                <td class={`status-${d.status}`}>{d.status}</td>
                <td>{d.attemptCount}</td>
                <td>{d.responseStatus ?? '—'}</td>
                <td>{d.error ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2>Text</h2>
      {e.bodyPurged
        ? <p class="muted">The bodies were purged after BODY_RETENTION_DAYS.</p>
        : e.text !== null ? <pre>{e.text}</pre> : <p class="muted">No text part.</p>}
      <p><a href={`${p}/emails`}>Back to emails</a></p>
    </Layout>
  );
}

/** "3 times, first …", with how many came from image proxies or link scanners. */
function engagement(events: EventRow[], type: 'email.opened' | 'email.clicked', first: Date | null): string {
  const all = events.filter((ev) => ev.type === type);
  if (all.length === 0 && !first) return '—';
  const machine = all.filter((ev) => ev.data.machine === true).length;
  return `${all.length} ${all.length === 1 ? 'time' : 'times'}${machine ? ` (${machine} by machines)` : ''}, first ${when(first ?? all[0]!.createdAt)}`;
}

function clicksByLink(events: EventRow[]) {
  const byLink = new Map<string, { link: string; clicks: number; machine: number }>();
  for (const ev of events) {
    if (ev.type !== 'email.clicked' || typeof ev.data.link !== 'string') continue;
    const entry = byLink.get(ev.data.link) ?? { link: ev.data.link, clicks: 0, machine: 0 };
    entry.clicks++;
    if (ev.data.machine === true) entry.machine++;
    byLink.set(ev.data.link, entry);
  }
  return [...byLink.values()];
}

/** An event's data without what the page already shows beside it. */
function eventDetails(data: Record<string, unknown>): string {
  const { email_id: _emailId, tags: _tags, ...rest } = data;
  return Object.keys(rest).length === 0 ? '' : JSON.stringify(rest);
}
