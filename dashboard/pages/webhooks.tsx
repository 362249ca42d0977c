import type { Project } from '../../src/projects/service.ts';
import type { EndpointRow } from '../../src/webhooks/schemas.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, Layout, when } from '../layout.tsx';

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
        <thead><tr><th>URL</th><th>Status</th><th>Consecutive failures</th><th>Created</th><th></th></tr></thead>
        <tbody>
          {props.endpoints.map((e) => (
            <tr>
              <td><code>{e.url}</code></td>
              <td>{STATUS[e.status]}</td>
              <td>{e.consecutiveFailures}</td>
              <td>{when(e.createdAt)}</td>
              <td><a href={`${p}/${e.id}`}>Manage</a></td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.endpoints.length === 0 && <p class="muted">No endpoints yet.</p>}
      <h2>Register an endpoint</h2>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf}>
        <input type="url" name="url" required value={props.url ?? ''} placeholder="https://example.com/webhooks" />{' '}
        <button type="submit">Register</button>
      </Form>
    </Layout>
  );
}

export function WebhookPage(props: Base & { endpoint: EndpointRow; error?: string; url?: string; secret?: string }) {
  const e = props.endpoint;
  const p = `${BASE}/projects/${props.project.id}/webhooks/${e.id}`;
  return (
    <Layout title="Webhook endpoint" csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <tbody>
          <tr><th>Id</th><td><code>{e.id}</code></td></tr>
          <tr><th>URL</th><td><code>{e.url}</code></td></tr>
          <tr><th>Status</th><td id="status">{STATUS[e.status]}</td></tr>
          <tr><th>Consecutive failures</th><td>{e.consecutiveFailures}</td></tr>
          <tr><th>Created</th><td>{when(e.createdAt)}</td></tr>
        </tbody>
      </table>
      <h2>Signing secret</h2>
      {props.secret ? (
        <>
          <p><code class="secret" id="signing-secret">{props.secret}</code></p>
          <p class="muted">Verify each delivery's X-Webhook-Signature with HMAC-SHA256 keyed by this whole string.</p>
        </>
      ) : (
        <Form action={`${p}/secret`} csrf={props.csrf}><button type="submit">Reveal signing secret</button></Form>
      )}
      <h2>Edit URL</h2>
      <p class="muted">The signing secret stays the same; queued deliveries go to the new URL.</p>
      <ErrorNote message={props.error} />
      <Form action={`${p}/url`} csrf={props.csrf}>
        <input type="url" name="url" required value={props.url ?? e.url} /> <button type="submit">Save URL</button>
      </Form>
      <h2>{e.status === 'active' ? 'Disable' : 'Re-enable'}</h2>
      {e.status === 'active' ? (
        <Form action={`${p}/disable`} csrf={props.csrf}><button type="submit">Disable endpoint</button></Form>
      ) : (
        <Form action={`${p}/enable`} csrf={props.csrf}><button type="submit">Re-enable endpoint</button></Form>
      )}
      <p><a href={`${BASE}/projects/${props.project.id}/webhooks`}>Back to webhooks</a></p>
    </Layout>
  );
}
