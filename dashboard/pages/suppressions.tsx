import type { Project } from '../../src/projects/service.ts';
import type { Suppression } from '../../src/suppressions/queries.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, Pager, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

export function SuppressionsPage(props: Base & {
  suppressions: Suppression[];
  hasMore: boolean;
  isFirst: boolean;
  search?: string;
  error?: string;
  address?: string;
}) {
  const p = `${BASE}/projects/${props.project.id}/suppressions`;
  const p0 = `${BASE}/projects/${props.project.id}`;
  return (
    <Layout title="Suppressions" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">Mail to these addresses is dropped at send time. Bounces and complaints add them; lifting one lets it receive mail again.</p>
      <IfAllowed action={p}>
        <h2>Suppress an address</h2>
        <ErrorNote message={props.error} />
        <Form action={p} csrf={props.csrf}>
          <input type="email" name="email" required maxlength={320} value={props.address ?? ''} placeholder="ann@example.net" aria-label="Address to suppress" />{' '}
          <button type="submit">Suppress</button>
        </Form>
      </IfAllowed>
      <form class="filters" method="get" action={p}>
        <label>Find an address
          <input type="text" name="email" value={props.search ?? ''} maxlength={320} placeholder="ann@example.net" />
        </label>
        <button type="submit">Find</button>
        {props.search && <a href={p}>Show all</a>}
      </form>
      <table id="suppressions">
        <thead><tr><th>Address</th><th>Reason</th><th>Added</th><th>Email</th><th></th></tr></thead>
        <tbody>
          {props.suppressions.map((s) => (
            <tr>
              <td>{s.address}</td>
              <td>{s.reason}</td>
              <td>{when(s.createdAt)}</td>
              <td>{s.emailId ? <a href={`${p0}/emails/${s.emailId}`}><code>{s.emailId}</code></a> : '—'}</td>
              <td>
                <Form action={`${p}/lift`} csrf={props.csrf} class="inline">
                  <input type="hidden" name="email" value={s.address} />
                  <button type="submit" aria-label={`Lift ${s.address}`}>Lift</button>
                </Form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.suppressions.length === 0 && <p class="muted">{props.search ? 'That address is not suppressed.' : 'No suppressed addresses.'}</p>}
      <Pager path={p} lastId={props.suppressions.at(-1)?.address} hasMore={props.hasMore} isFirst={props.isFirst} />
    </Layout>
  );
}
