import type { Project } from '../../src/projects/service.ts';
import type { DeliveryRow, EndpointRow } from '../../src/webhooks/schemas.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, Pager, when } from '../layout.tsx';
import { WEBHOOK_EVENT_TYPES as EVENT_TYPES } from '../../src/events/record.ts';

const typesText = (types: string[] | null) => (types ? types.join(', ') : 'all');

/** One checkbox per event type; none ticked means every type. */
function EventTypeChoices(props: { selected: string[] | null }) {
  return (
    <fieldset class="event-types">
      <legend>Event types (none ticked: all)</legend>
      {EVENT_TYPES.map((t) => (
        <label><input type="checkbox" name="event_types" value={t} checked={props.selected?.includes(t) ?? false} /> {t}</label>
      ))}
    </fieldset>
  );
}

type Base = { csrf: string; email: string; project: Project };

const STATUS: Record<EndpointRow['status'], string> = {
  active: 'active',
  disabled_by_user: 'disabled (by you)',
  disabled_after_failures: 'disabled after failures',
};

export function WebhooksPage(props: Base & { endpoints: EndpointRow[]; error?: string; url?: string }) {
  const p = `${BASE}/projects/${props.project.id}/webhooks`;
  return (
    <Layout title="Webhooks" csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <thead><tr><th>URL</th><th>Status</th><th>Event types</th><th>Consecutive failures</th><th>Created</th><th></th></tr></thead>
        <tbody>
          {props.endpoints.map((e) => (
            <tr>
              <td><code>{e.url}</code></td>
              <td>{STATUS[e.status]}</td>
              <td class="event-types">{typesText(e.eventTypes)}</td>
              <td>{e.consecutiveFailures}</td>
              <td>{when(e.createdAt)}</td>
              <td><a href={`${p}/${e.id}`}>Manage</a> · <a href={`${p}/${e.id}/deliveries`}>Deliveries</a></td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.endpoints.length === 0 && <p class="muted">No endpoints yet.</p>}
      <IfAllowed action={p}>
      <h2>Register an endpoint</h2>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf}>
        <input type="url" name="url" required value={props.url ?? ''} placeholder="https://example.com/webhooks" />{' '}
        <EventTypeChoices selected={null} />
        <button type="submit">Register</button>
      </Form>
      </IfAllowed>
    </Layout>
  );
}

export function WebhookPage(props: Base & { endpoint: EndpointRow; error?: string; url?: string; secret?: string; rotated?: boolean }) {
  const e = props.endpoint;
  const p = `${BASE}/projects/${props.project.id}/webhooks/${e.id}`;
  return (
    <Layout title="Webhook endpoint" csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <tbody>
          <tr><th>Id</th><td><code>{e.id}</code></td></tr>
          <tr><th>URL</th><td><code>{e.url}</code></td></tr>
          <tr><th>Status</th><td id="status">{STATUS[e.status]}</td></tr>
          <tr><th>Event types</th><td id="event-types">{typesText(e.eventTypes)}</td></tr>
          <tr><th>Consecutive failures</th><td>{e.consecutiveFailures}</td></tr>
          <tr><th>Created</th><td>{when(e.createdAt)}</td></tr>
        </tbody>
      </table>
      <p><a href={`${p}/deliveries`}>Deliveries to this endpoint</a></p>
      <IfAllowed action={`${p}/secret`}>
      <h2>Signing secret</h2>
      {props.secret ? (
        <>
          {props.rotated && <p class="note" role="status">A new signing secret is in force: every delivery from now on, queued ones included, is signed with it, and the old one no longer verifies.</p>}
          <p><code class="secret" id="signing-secret">{props.secret}</code></p>
          <p class="muted">Verify each delivery with any Standard Webhooks library (webhook-id, webhook-timestamp, webhook-signature), or its X-Webhook-Signature with HMAC-SHA256 keyed by this whole string.</p>
        </>
      ) : (
        <Form action={`${p}/secret`} csrf={props.csrf}><button type="submit">Reveal signing secret</button></Form>
      )}
      <Form action={`${p}/rotate-secret`} csrf={props.csrf}><button type="submit">Rotate signing secret</button></Form>
      </IfAllowed>
      <IfAllowed action={`${p}/url`}>
      <h2>Edit URL</h2>
      <p class="muted">The signing secret stays the same; queued deliveries go to the new URL.</p>
      <ErrorNote message={props.error} />
      <Form action={`${p}/url`} csrf={props.csrf}>
        <input type="url" name="url" required value={props.url ?? e.url} /> <button type="submit">Save URL</button>
      </Form>
      </IfAllowed>
      <h2>Event types</h2>
      <p class="muted">Only these types are delivered to the endpoint, from the next event on.</p>
      <Form action={`${p}/event-types`} csrf={props.csrf} readOnly>
        <EventTypeChoices selected={e.eventTypes} />
        <button type="submit">Save event types</button>
      </Form>
      <IfAllowed action={`${p}/disable`}>
      <h2>{e.status === 'active' ? 'Disable' : 'Re-enable'}</h2>
      {e.status === 'active' ? (
        <Form action={`${p}/disable`} csrf={props.csrf}><button type="submit">Disable endpoint</button></Form>
      ) : (
        <Form action={`${p}/enable`} csrf={props.csrf}><button type="submit">Re-enable endpoint</button></Form>
      )}
      </IfAllowed>
      <IfAllowed action={`${p}/delete`}>
      <h2>Delete</h2>
      <p class="muted">The endpoint and its delivery log go; pending deliveries are never sent. To keep the log, disable it instead.</p>
      <Form action={`${p}/delete`} csrf={props.csrf}><button type="submit">Delete endpoint</button></Form>
      </IfAllowed>
      <p><a href={`${BASE}/projects/${props.project.id}/webhooks`}>Back to webhooks</a></p>
    </Layout>
  );
}

export type EndpointDelivery = DeliveryRow & { eventType: string; emailId: string };

/** Every delivery to one endpoint, newest first, each with a button to send its event again. */
export function DeliveriesPage(props: Base & {
  endpoint: EndpointRow;
  deliveries: EndpointDelivery[];
  hasMore: boolean;
  isFirst: boolean;
  redelivered?: string;
}) {
  const e = props.endpoint;
  const p0 = `${BASE}/projects/${props.project.id}`;
  const p = `${p0}/webhooks/${e.id}`;
  const active = e.status === 'active';
  return (
    <Layout title="Webhook deliveries" csrf={props.csrf} email={props.email} project={props.project}>
      <p>To <code>{e.url}</code>, {STATUS[e.status]}. <a href={p}>Manage the endpoint</a></p>
      {props.redelivered && (
        <p class="note" role="status" id="redelivered">The event was queued again as delivery <code>{props.redelivered}</code>.</p>
      )}
      {!active && <p class="note">The endpoint is disabled: re-enable it to redeliver.</p>}
      <table id="deliveries">
        <thead><tr><th>Created</th><th>Event</th><th>Email</th><th>Status</th><th>Attempts</th><th>Last attempt</th><th>Next attempt</th><th>Response</th><th>Error</th><th></th></tr></thead>
        <tbody>
          {props.deliveries.map((d) => (
            <tr id={`row-${d.id}`}>
              <td>{when(d.createdAt)}</td>
              <td>{d.eventType}</td>
              <td><a href={`${p0}/emails/${d.emailId}`} title={d.emailId}><code>…{d.emailId.slice(-8)}</code></a></td>
              <td class={`status-${d.status}`}>{d.status}</td>
              <td>{d.attemptCount}</td>
              <td>{when(d.lastAttemptAt)}</td>
              <td>{d.status === 'pending' ? when(d.nextAttemptAt) : '—'}</td>
              <td>{d.responseStatus ?? '—'}</td>
              <td>{d.error ?? ''}</td>
              <td>
                {active && (
                  <Form action={`${p}/deliveries/${d.id}/redeliver`} csrf={props.csrf} class="inline">
                    <button type="submit">Redeliver</button>
                  </Form>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.deliveries.length === 0 && <p class="muted">No deliveries{props.isFirst ? ' yet' : ' older than these'}.</p>}
      <Pager path={`${p}/deliveries`} lastId={props.deliveries.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
    </Layout>
  );
}
