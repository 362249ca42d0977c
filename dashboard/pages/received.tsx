import type { Project } from '../../src/projects/service.ts';
import type { ReceivedRow } from '../../src/inbound/queries.ts';
import { BASE } from '../env.ts';
import { Layout, Pager, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

/** The project's received emails, newest first: read only, for every role. */
export function ReceivedPage(props: Base & { emails: ReceivedRow[]; hasMore: boolean; isFirst: boolean }) {
  const p = `${BASE}/projects/${props.project.id}/received`;
  return (
    <Layout title="Received" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">Mail received at this project's domains (SES receiving, or POST /v1/sink/inbound for a sink project).</p>
      <table id="received">
        <thead><tr><th>Received</th><th>From</th><th>To</th><th>Subject</th><th>In reply to</th></tr></thead>
        <tbody>
          {props.emails.map((r) => (
            <tr id={`row-${r.id}`}>
              <td>{when(r.createdAt)}</td>
              <td>{r.fromAddress}</td>
              <td>{r.receivedFor.join(', ') || r.toAddresses.join(', ')}</td>
              <td><a href={`${p}/${r.id}`}>{r.subject || '(no subject)'}</a></td>
              <td>{r.inReplyToEmailId ? <code>{r.inReplyToEmailId}</code> : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.emails.length === 0 && <p class="muted" id="received-empty">{props.isFirst ? 'Nothing received yet.' : 'No older emails.'}</p>}
      <Pager path={p} query={{}} lastId={props.emails.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
    </Layout>
  );
}

/**
 * One received email. Its HTML is the sender's: it is never inlined, but loads from its own
 * route into an iframe sandboxed with no permissions, under the inbox's strict CSP.
 */
export function ReceivedEmailPage(props: Base & { received: ReceivedRow }) {
  const r = props.received;
  const p = `${BASE}/projects/${props.project.id}/received/${r.id}`;
  const emailLink = (id: string) => (id.startsWith('email_') ? <a href={`${BASE}/projects/${props.project.id}/emails/${id}`}><code>{id}</code></a> : <a href={`${BASE}/projects/${props.project.id}/received/${id}`}><code>{id}</code></a>);
  return (
    <Layout title={r.subject || '(no subject)'} csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <tbody>
          <tr><th>From</th><td>{r.fromAddress}</td></tr>
          <tr><th>To</th><td>{r.toAddresses.join(', ')}</td></tr>
          {r.ccAddresses.length > 0 && <tr><th>Cc</th><td>{r.ccAddresses.join(', ')}</td></tr>}
          <tr><th>Received for</th><td>{r.receivedFor.join(', ')}</td></tr>
          <tr><th>Received</th><td>{when(r.createdAt)}</td></tr>
          <tr><th>In reply to</th><td>{r.inReplyToEmailId ? emailLink(r.inReplyToEmailId) : '—'}</td></tr>
          <tr><th>Thread</th><td>{emailLink(r.threadId)}</td></tr>
          <tr><th>Verdicts</th><td>{Object.entries(r.verdicts).map(([k, v]) => `${k} ${v}`).join(', ')}</td></tr>
          <tr><th>Flags</th><td>{[r.isAutoReply && 'auto-reply', r.isBounce && 'bounce', r.contentTooLarge && 'too large to fetch', r.parseFailed && 'could not be parsed'].filter(Boolean).join(', ') || '—'}</td></tr>
        </tbody>
      </table>
      <h2>HTML</h2>
      {r.html !== null ? <iframe sandbox="" src={`${p}/html`} title="HTML body" referrerpolicy="no-referrer"></iframe> : <p class="muted">No HTML part.</p>}
      <h2>Reply</h2>
      {r.strippedText !== null ? <pre id="stripped">{r.strippedText}</pre> : <p class="muted">No text part.</p>}
      <h2>Text</h2>
      {r.text !== null ? <pre>{r.text}</pre> : <p class="muted">No text part.</p>}
      <h2>Attachments</h2>
      {r.attachments.length === 0 ? <p class="muted">None.</p> : (
        <table>
          <thead><tr><th>File name</th><th>Content type</th><th>Size</th></tr></thead>
          <tbody>
            {r.attachments.map((a) => <tr><td>{a.filename ?? '(unnamed)'}</td><td>{a.content_type}</td><td>{a.size} B</td></tr>)}
          </tbody>
        </table>
      )}
      <h2>Headers</h2>
      <table>
        <tbody>
          {Object.entries(r.headers).map(([name, value]) => <tr><th>{name}</th><td><code>{String(value)}</code></td></tr>)}
        </tbody>
      </table>
      <p><a href={`${BASE}/projects/${props.project.id}/received`}>Back to received mail</a></p>
    </Layout>
  );
}
