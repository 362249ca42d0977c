import type { ApiKeyRow } from '../../src/keys/queries.ts';
import type { Project } from '../../src/projects/service.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

export function KeysPage(props: Base & { keys: ApiKeyRow[]; error?: string }) {
  const p = `${BASE}/projects/${props.project.id}/keys`;
  return (
    <Layout title="API keys" csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <thead><tr><th>Name</th><th>Prefix</th><th>Permission</th><th>Created</th><th>Last used</th><th>Revoked</th><th></th></tr></thead>
        <tbody>
          {props.keys.map((k) => (
            <tr>
              <td>{k.name}</td>
              <td><code>{k.keyPrefix}…</code></td>
              <td>{k.permission === 'sending' ? 'sending only' : 'full access'}</td>
              <td>{when(k.createdAt)}</td>
              <td>{when(k.lastUsedAt)}</td>
              <td>{when(k.revokedAt)}</td>
              <td>
                {!k.revokedAt && (
                  <Form action={`${p}/${k.id}/revoke`} csrf={props.csrf} class="inline">
                    <button type="submit">Revoke</button>
                  </Form>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.keys.length === 0 && <p class="muted">No keys yet.</p>}
      <IfAllowed action={p}>
      <h2>New key</h2>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf}>
        <input type="text" name="name" required maxlength={200} placeholder="Key name" />{' '}
        <select name="permission" aria-label="Permission">
          <option value="full">Full access</option>
          <option value="sending">Sending only (send, batch, reschedule, cancel)</option>
        </select>{' '}
        <button type="submit">Create key</button>
      </Form>
      </IfAllowed>
    </Layout>
  );
}

export function KeyCreatedPage(props: Base & { name: string; apiKey: string }) {
  return (
    <Layout title="Key created" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="note">
        Copy this key now. It is shown only this once: Mailroom stores only a hash of it, so a lost
        key cannot be recovered, only replaced.
      </p>
      <p>{props.name}: <code class="secret" id="new-key">{props.apiKey}</code></p>
      <p><a href={`${BASE}/projects/${props.project.id}/keys`}>Back to API keys</a></p>
    </Layout>
  );
}
