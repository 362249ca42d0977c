import type { Project } from '../../src/projects/service.ts';
import type { SinkMessageRow, SinkMessageSummaryRow } from '../../src/sink/schemas.ts';
import { BASE } from '../env.ts';
import { Form, Layout, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

export function InboxPage(props: Base & { messages: SinkMessageSummaryRow[]; hasMore: boolean }) {
  const p = `${BASE}/projects/${props.project.id}/inbox`;
  return (
    <Layout title="Inbox" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">Mail this project sent to the built-in sink (no provider connection). Nothing here left the machine.</p>
      <table>
        <thead><tr><th>Received</th><th>From</th><th>To</th><th>Subject</th><th>Size</th></tr></thead>
        <tbody>
          {props.messages.map((m) => (
            <tr>
              <td>{when(m.receivedAt)}</td>
              <td>{m.fromAddress}</td>
              <td>{m.toAddresses.join(', ')}</td>
              <td><a href={`${p}/${m.id}`}>{m.subject || '(no subject)'}</a></td>
              <td>{m.sizeBytes} B</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.messages.length === 0 && <p class="muted">The inbox is empty.</p>}
      {props.hasMore && <p class="muted">Showing the newest {props.messages.length}; older ones are in the API (GET /v1/sink/messages).</p>}
      {props.messages.length > 0 && (
        <Form action={`${p}/clear`} csrf={props.csrf}><button type="submit">Empty the inbox</button></Form>
      )}
    </Layout>
  );
}

/**
 * The caught HTML is never inlined: it loads from its own route into an iframe sandboxed with no
 * permissions at all (no scripts, an opaque origin), and that route adds its own strict CSP.
 */
export function MessagePage(props: Base & { message: SinkMessageRow }) {
  const m = props.message;
  const p = `${BASE}/projects/${props.project.id}/inbox/${m.id}`;
  return (
    <Layout title={m.subject || '(no subject)'} csrf={props.csrf} email={props.email} project={props.project}>
      <table>
        <tbody>
          <tr><th>From</th><td>{m.fromAddress}</td></tr>
          <tr><th>To</th><td>{m.toAddresses.join(', ')}</td></tr>
          {m.ccAddresses.length > 0 && <tr><th>Cc</th><td>{m.ccAddresses.join(', ')}</td></tr>}
          <tr><th>Received</th><td>{when(m.receivedAt)}</td></tr>
          <tr><th>Email</th><td>{m.emailId ? <code>{m.emailId}</code> : '—'}</td></tr>
          <tr><th>Size</th><td>{m.sizeBytes} B</td></tr>
        </tbody>
      </table>
      <h2>HTML</h2>
      {m.html !== null ? <iframe sandbox="" src={`${p}/html`} title="HTML body" referrerpolicy="no-referrer"></iframe> : <p class="muted">No HTML part.</p>}
      <h2>Text</h2>
      {m.text !== null ? <pre>{m.text}</pre> : <p class="muted">No text part.</p>}
      <h2>Attachments</h2>
      {m.attachments.length === 0 ? <p class="muted">None.</p> : (
        <table>
          <thead><tr><th>File name</th><th>Content type</th><th>Size</th></tr></thead>
          <tbody>
            {m.attachments.map((a) => <tr><td>{a.filename ?? '(unnamed)'}</td><td>{a.content_type}</td><td>{a.size_bytes} B</td></tr>)}
          </tbody>
        </table>
      )}
      <h2>Headers</h2>
      <table>
        <tbody>
          {Object.entries(m.headers).map(([name, value]) => <tr><th>{name}</th><td><code>{String(value)}</code></td></tr>)}
        </tbody>
      </table>
      <h2>Raw source</h2>
      <pre>{m.raw.toString('utf8')}</pre>
      <p><a href={`${BASE}/projects/${props.project.id}/inbox`}>Back to the inbox</a></p>
    </Layout>
  );
}
