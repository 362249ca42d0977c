import type { Project } from '../../src/projects/service.ts';
import type { BroadcastCounts, BroadcastRow } from '../../src/broadcasts/queries.ts';
import type { SegmentRow } from '../../src/segments/queries.ts';
import type { TopicRow } from '../../src/topics/queries.ts';
import type { ContactRow } from '../../src/contacts/queries.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, Pager, when } from '../layout.tsx';
import { LIVE_PROGRESS_SCRIPT_PATH } from '../routes/assets.ts';

type Base = { csrf: string; email: string; project: Project };

export const BROADCAST_COUNTS = ['recipients', 'suppressed', 'queued', 'sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'unsubscribed', 'failed'] as const;

export const editable = (b: BroadcastRow) => b.status === 'draft' || b.status === 'scheduled';
/**
 * Whether the bar has stopped: the broadcast is no longer paging its segment and none of its
 * copies waits in the queue (a `sent` broadcast's last copies may still be on their way).
 */
export const broadcastDone = (b: BroadcastRow, c: BroadcastCounts) => b.status !== 'sending' && c.queued === 0;

/** Recipients handed to the provider or settled (sent or failed), in whole percent of the recipients. */
export function broadcastPercent(b: BroadcastRow, c: BroadcastCounts): number {
  if (c.recipients === 0) return b.status === 'sent' ? 100 : 0;
  return Math.min(100, Math.floor(((c.sent + c.failed) / c.recipients) * 100));
}

export type BroadcastTyped = Partial<Record<'name' | 'segment_id' | 'topic_id' | 'from' | 'subject' | 'preview_text' | 'html' | 'text', string>>;

export const typedOf = (b: BroadcastRow): BroadcastTyped => ({
  name: b.name, segment_id: b.segmentId, topic_id: b.topicId ?? '', from: b.fromAddress, subject: b.subject,
  preview_text: b.previewText ?? '', html: b.html ?? '', text: b.text ?? '',
});

/** The compose fields, shared by the new-broadcast form and a draft's edit form. */
function ComposeFields(props: { segments: SegmentRow[]; topics: TopicRow[]; typed: BroadcastTyped }) {
  const t = props.typed;
  return (
    <>
      <p><label>Name <input type="text" name="name" maxlength={256} value={t.name ?? ''} /></label></p>
      <p><label>Segment <select name="segment_id" required>
        {props.segments.map((s) => <option value={s.id} selected={s.id === t.segment_id}>{s.name}</option>)}
      </select></label>{' '}
      <label>Topic <select name="topic_id">
        <option value="">none (unsubscribing leaves every broadcast)</option>
        {props.topics.map((tp) => <option value={tp.id} selected={tp.id === t.topic_id}>{tp.name} ({tp.defaultSubscription})</option>)}
      </select></label></p>
      <p><label>From <input type="text" name="from" required maxlength={320} value={t.from ?? ''} placeholder="News <news@example.com>" /></label></p>
      <p><label>Subject <input type="text" name="subject" required maxlength={998} value={t.subject ?? ''} /></label></p>
      <p><label>Preview text <input type="text" name="preview_text" maxlength={500} value={t.preview_text ?? ''} /></label></p>
      <p><label>HTML<br /><textarea name="html" rows={8}>{t.html ?? ''}</textarea></label></p>
      <p><label>Text<br /><textarea name="text" rows={4}>{t.text ?? ''}</textarea></label></p>
      <p class="muted">Placeholders: <code>{'{{{contact.first_name|there}}}'}</code>, <code>{'{{{contact.<property>|fallback}}}'}</code>,{' '}
        <code>{'{{{EMAIL}}}'}</code>, <code>{'{{{RESEND_UNSUBSCRIBE_URL}}}'}</code> (a footer link is added when the content has none).</p>
    </>
  );
}

export function BroadcastsPage(props: Base & {
  broadcasts: BroadcastRow[];
  segments: SegmentRow[];
  topics: TopicRow[];
  hasMore: boolean;
  isFirst: boolean;
  error?: string;
  typed?: BroadcastTyped;
}) {
  const p = `${BASE}/projects/${props.project.id}/broadcasts`;
  const segmentName = new Map(props.segments.map((s) => [s.id, s.name]));
  return (
    <Layout title="Broadcasts" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">One email to every contact of a segment who has not unsubscribed (and, with a topic, who receives it), sent behind transactional mail.</p>
      <table id="broadcasts">
        <thead><tr><th>Name</th><th>Subject</th><th>Segment</th><th>Status</th><th>Recipients</th><th>Created</th></tr></thead>
        <tbody>
          {props.broadcasts.map((b) => (
            <tr>
              <td><a href={`${p}/${b.id}`}>{b.name || b.id}</a></td>
              <td>{b.subject}</td>
              <td>{segmentName.get(b.segmentId) ?? b.segmentId}</td>
              <td class={`status-${b.status}`}>{b.status}{b.scheduledAt && b.status === 'scheduled' ? ` for ${when(b.scheduledAt)}` : ''}</td>
              <td>{b.recipients}</td>
              <td>{when(b.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.broadcasts.length === 0 && <p class="muted">No broadcasts yet.</p>}
      <Pager path={p} lastId={props.broadcasts.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
      <IfAllowed action={p}>
        <h2>New broadcast</h2>
        <ErrorNote message={props.error} />
        {props.segments.length === 0
          ? <p class="muted">A broadcast goes to a segment: <a href={`${BASE}/projects/${props.project.id}/segments`}>create one</a> first.</p>
          : (
            <Form action={p} csrf={props.csrf}>
              <ComposeFields segments={props.segments} topics={props.topics} typed={props.typed ?? {}} />
              <button type="submit">Save draft</button>
            </Form>
          )}
      </IfAllowed>
    </Layout>
  );
}

export function BroadcastPage(props: Base & {
  broadcast: BroadcastRow;
  counts: BroadcastCounts;
  segments: SegmentRow[];
  topics: TopicRow[];
  /** The contact the preview is rendered for, when one was chosen. */
  previewContact?: ContactRow;
  previewQuery: string;
  previewError?: string;
  error?: string;
  notice?: string;
  typed?: BroadcastTyped;
}) {
  const b = props.broadcast;
  const p = `${BASE}/projects/${props.project.id}/broadcasts/${b.id}`;
  const done = broadcastDone(b, props.counts);
  const percent = broadcastPercent(b, props.counts);
  return (
    <Layout title={b.name || 'Broadcast'} csrf={props.csrf} email={props.email} project={props.project}
      scripts={done ? [] : [LIVE_PROGRESS_SCRIPT_PATH]} refreshSeconds={done ? undefined : 2}>
      <p><a href={`${BASE}/projects/${props.project.id}/broadcasts`}>All broadcasts</a> · <code>{b.id}</code> · created {when(b.createdAt)}</p>
      <ErrorNote message={props.error} />
      {props.notice && <p class="note" role="status">{props.notice}</p>}
      <p>Status: <strong id="progress-status" class={`status-${b.status}`}>{b.status}</strong>
        {b.status === 'scheduled' && b.scheduledAt && <> for {when(b.scheduledAt)}</>}
        {b.sentAt && <> · sent {when(b.sentAt)}</>}</p>
      {b.status !== 'draft' && (
        <>
          <p>
            <progress id="broadcast-progress" max={100} value={percent} data-live={done ? undefined : `${p}/live`}>{percent}%</progress>{' '}
            <span class="muted">{percent}% of the recipients sent</span>
          </p>
          <div class="stats" id="broadcast-counts">
            {BROADCAST_COUNTS.map((k) => <div class="stat"><b data-count={k}>{props.counts[k]}</b>{k}</div>)}
          </div>
        </>
      )}

      {editable(b) && (
        <IfAllowed action={`${p}/send`}>
          <h2>Send</h2>
          <Form action={`${p}/send`} csrf={props.csrf} class="filters">
            <label>When (empty: now; or "in 1 hour", "tomorrow at 9am", ISO 8601)
              <input type="text" name="scheduled_at" maxlength={200} placeholder="now" />
            </label>
            <button type="submit">{b.status === 'scheduled' ? 'Reschedule or send' : 'Send or schedule'}</button>
          </Form>
        </IfAllowed>
      )}
      {(b.status === 'scheduled' || b.status === 'sending') && (
        <Form action={`${p}/cancel`} csrf={props.csrf}>
          <button type="submit">{b.status === 'scheduled' ? 'Cancel the schedule' : 'Cancel sending'}</button>
        </Form>
      )}

      <h2>Preview</h2>
      <form class="filters" method="get" action={p} id="preview-for">
        <label>As received by (a contact's address)
          <input type="search" name="contact" maxlength={320} value={props.previewContact?.email ?? ''} placeholder="ann@example.com" />
        </label>
        <button type="submit">Preview</button>
      </form>
      {props.previewError && <p class="error" role="alert">{props.previewError}</p>}
      <p class="muted">{props.previewContact ? `For ${props.previewContact.email}.` : 'For a contact with no name or properties (fallbacks shown).'}</p>
      {b.html !== null && <iframe id="broadcast-preview" sandbox="" title="Broadcast preview" src={`${p}/preview${props.previewQuery}`}></iframe>}
      {b.html === null && b.text !== null && <pre>{b.text}</pre>}

      <IfAllowed action={`${p}/test`}>
        <h2>Send a test</h2>
        <Form action={`${p}/test`} csrf={props.csrf} class="filters">
          <input type="hidden" name="contact" value={props.previewContact?.email ?? ''} />
          <label>To <input type="email" name="to" required maxlength={320} placeholder="you@example.com" /></label>
          <button type="submit">Send test</button>
        </Form>
      </IfAllowed>

      <h2>Content</h2>
      {b.templateId !== null && (
        <p class="muted" id="broadcast-template">Rendered from template <code>{b.templateId}</code> version {b.templateVersion}
          {editable(b) ? '; saving with the HTML and text as they are keeps it, editing them makes the content this broadcast\'s own.' : '.'}</p>
      )}
      {editable(b)
        ? (
          <Form action={p} csrf={props.csrf} readOnly>
            <ComposeFields segments={props.segments} topics={props.topics} typed={props.typed ?? typedOf(b)} />
            <button type="submit">Save</button>
          </Form>
        )
        : (
          <table id="broadcast-content">
            <tbody>
              <tr><th>From</th><td>{b.fromAddress}</td></tr>
              <tr><th>Subject</th><td>{b.subject}</td></tr>
              <tr><th>Segment</th><td>{props.segments.find((s) => s.id === b.segmentId)?.name ?? b.segmentId}</td></tr>
              <tr><th>Topic</th><td>{b.topicId ? props.topics.find((t) => t.id === b.topicId)?.name ?? b.topicId : '—'}</td></tr>
            </tbody>
          </table>
        )}
    </Layout>
  );
}
