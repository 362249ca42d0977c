import { dnsRecordsFor } from '../../src/domains/dns-records.ts';
import type { DomainRow } from '../../src/domains/schemas.ts';
import type { Project } from '../../src/projects/service.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, when } from '../layout.tsx';

export function DomainsPage(props: { csrf: string; email: string; project: Project; domains: DomainRow[]; error?: string; trackingError?: { domainId: string; message: string } }) {
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
          <h3>Tracking</h3>
          <p class="muted">Opens (a 1×1 image) and clicks (links through Mailroom) of mail from this domain; off by default. See docs/tracking.md.</p>
          {props.trackingError?.domainId === d.id && <ErrorNote message={props.trackingError.message} />}
          <Form action={`${p}/${d.id}/tracking`} csrf={props.csrf} class="tracking" readOnly>
            <label><input type="checkbox" name="open_tracking" value="on" checked={d.openTracking} /> Open tracking</label>{' '}
            <label><input type="checkbox" name="click_tracking" value="on" checked={d.clickTracking} /> Click tracking</label>{' '}
            <label>Tracking domain <input type="text" name="tracking_domain" value={d.trackingDomain ?? ''} maxlength={253} placeholder={`track.${d.value}`} /></label>{' '}
            <button type="submit">Save tracking</button>
          </Form>
          <Form action={`${p}/${d.id}/delete`} csrf={props.csrf}>
            <button type="submit">Delete domain</button>{' '}
            <span class="muted">{d.receiving ? 'Turn receiving off first.' : 'Mailroom forgets it; the SES identity in your AWS account is left as it is.'}</span>
          </Form>
        </section>
      ))}
      <IfAllowed action={p}>
      <h2>Add a domain</h2>
      <p class="muted">Domains are verified with SES, so the project needs a provider connection (CLI `provider connect`).</p>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf}>
        <input type="text" name="domain" required maxlength={253} placeholder="example.com" /> <button type="submit">Add domain</button>
      </Form>
      </IfAllowed>
    </Layout>
  );
}
