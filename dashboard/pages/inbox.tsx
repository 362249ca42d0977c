import type { Project } from '../../src/projects/service.ts';
import type { SinkMessageRow, SinkMessageSummaryRow } from '../../src/sink/schemas.ts';
import { BASE } from '../env.ts';
import { Form, Layout, Pager, when } from '../layout.tsx';
import { LIVE_INBOX_SCRIPT_PATH } from '../routes/assets.ts';

type Base = { csrf: string; email: string; project: Project };

export function InboxPage(props: Base & { messages: SinkMessageSummaryRow[]; hasMore: boolean; isFirst: boolean; search?: string }) {
  const p = `${BASE}/projects/${props.project.id}/inbox`;
  // Only the unfiltered first page updates itself; a search or an older page stays as it was asked for.
  const live = props.isFirst && !props.search;
  const newest = props.messages[0]?.id;
  return (
    <Layout title="Inbox" csrf={props.csrf} email={props.email} project={props.project} scripts={live ? [LIVE_INBOX_SCRIPT_PATH] : []}>
      <p class="muted">Mail this project sent to the built-in sink (no provider connection). Nothing here left the machine.</p>
      <form class="filters" method="get" action={p} role="search">
        <label>Search subject, sender or recipient
          <input type="search" name="q" value={props.search ?? ''} maxlength={200} />
        </label>
        <button type="submit">Search</button>
        {props.search && <a href={p}>Show all</a>}
      </form>
      {live && <p class="muted" id="live-status" aria-live="polite">Reload to see new mail.</p>}
      <table id="inbox" data-live={live ? `${p}/live${newest ? `?after=${newest}` : ''}` : undefined}>
        <thead><tr><th>Received</th><th>From</th><th>To</th><th>Subject</th><th>Size</th></tr></thead>
        <tbody>
          {props.messages.map((m) => (
            <tr id={`row-${m.id}`}>
              <td>{when(m.receivedAt)}</td>
              <td>{m.fromAddress}</td>
              <td>{m.toAddresses.join(', ')}</td>
              <td><a href={`${p}/${m.id}`}>{m.subject || '(no subject)'}</a></td>
              <td>{m.sizeBytes} B</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.messages.length === 0 && (
        <p class="muted" id="inbox-empty">{props.search ? 'No message matches.' : props.isFirst ? 'The inbox is empty.' : 'No older messages.'}</p>
      )}
      <Pager path={p} query={{ q: props.search }} lastId={props.messages.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
      {props.isFirst && !props.search && props.messages.length > 0 && (
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
          <tr><th>Email</th><td>{m.emailId ? <a href={`${BASE}/projects/${props.project.id}/emails/${m.emailId}`}><code>{m.emailId}</code></a> : '—'}</td></tr>
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
