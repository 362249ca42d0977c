import { dnsRecordsFor } from '../../src/domains/dns-records.ts';
import type { DomainRow } from '../../src/domains/schemas.ts';
import type { Project } from '../../src/projects/service.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, Layout, when } from '../layout.tsx';

export function DomainsPage(props: { csrf: string; email: string; project: Project; domains: DomainRow[]; error?: string }) {
  const p = `${BASE}/projects/${props.project.id}/domains`;
  return (
    <Layout title="Sending domains" csrf={props.csrf} email={props.email} project={props.project}>
      {props.domains.length === 0 && <p class="muted">No domains yet.</p>}
      {props.domains.map((d) => (
        <section>
          <h2>{d.value} <span class="muted">({d.region})</span></h2>
          <p>
            Verification: <b>{d.verificationStatus}</b> · DKIM: <b>{d.dkimStatus ?? '—'}</b> · MAIL FROM:{' '}
            <b>{d.mailFromStatus ?? '—'}</b> · last checked {when(d.lastCheckedAt)}{' '}
            <Form action={`${p}/${d.id}/check`} csrf={props.csrf} class="inline"><button type="submit">Check now</button></Form>
          </p>
          <table>
            <thead><tr><th>Type</th><th>Name</th><th>Value</th></tr></thead>
            <tbody>
              {dnsRecordsFor(d).map((r) => (
                <tr><td>{r.record_type}</td><td><code>{r.name}</code></td><td><code>{r.value}</code></td></tr>
              ))}
            </tbody>
          </table>
        </section>
      ))}
      <h2>Add a domain</h2>
      <p class="muted">Domains are verified with SES, so the project needs a provider connection (CLI `provider connect`).</p>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf}>
        <input type="text" name="domain" required maxlength={253} placeholder="example.com" /> <button type="submit">Add domain</button>
      </Form>
    </Layout>
  );
}
