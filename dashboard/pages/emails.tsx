import type { EmailRow } from '../../src/emails/schemas.ts';
import type { Project } from '../../src/projects/service.ts';
import { Layout, when } from '../layout.tsx';

export function EmailsPage(props: { csrf: string; email: string; project: Project; emails: EmailRow[] }) {
  return (
    <Layout title="Recent emails" csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <thead><tr><th>Created</th><th>Id</th><th>From</th><th>To</th><th>Subject</th><th>Status</th><th>Last error</th></tr></thead>
        <tbody>
          {props.emails.map((e) => (
            <tr>
              <td>{when(e.createdAt)}</td>
              <td><code>{e.id}</code></td>
              <td>{e.fromAddress}</td>
              <td>{e.toAddresses.join(', ')}</td>
              <td>{e.subject}</td>
              <td>{e.status}</td>
              <td>{e.lastError ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.emails.length === 0 && <p class="muted">No emails yet.</p>}
    </Layout>
  );
}
