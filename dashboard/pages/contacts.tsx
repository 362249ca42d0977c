import type { Child } from 'hono/jsx';
import type { Project } from '../../src/projects/service.ts';
import type { ContactRow } from '../../src/contacts/queries.ts';
import type { ContactPropertyRow } from '../../src/contacts/property-queries.ts';
import type { SegmentRow } from '../../src/segments/queries.ts';
import type { ContactTopicRow, TopicRow } from '../../src/topics/queries.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, Pager, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

const fullName = (c: ContactRow) => [c.firstName, c.lastName].filter(Boolean).join(' ') || '—';

export type ContactsTyped = { email?: string; first_name?: string; last_name?: string };

export function ContactsPage(props: Base & {
  contacts: ContactRow[];
  segments: SegmentRow[];
  hasMore: boolean;
  isFirst: boolean;
  search?: string;
  segmentId?: string;
  error?: string;
  typed?: ContactsTyped;
  children?: Child;
}) {
  const p0 = `${BASE}/projects/${props.project.id}`;
  const p = `${p0}/contacts`;
  const segmentName = new Map(props.segments.map((s) => [s.id, s.name]));
  return (
    <Layout title="Contacts" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">
        The people broadcasts go to, one per address. Group them in <a href={`${p0}/segments`}>segments</a>;
        their choices per <a href={`${p0}/topics`}>topic</a> decide which broadcasts reach them.
      </p>
      <IfAllowed action={p}>
        <h2>Add a contact</h2>
        <ErrorNote message={props.error} />
        <Form action={p} csrf={props.csrf} class="filters">
          <label>Email <input type="email" name="email" required maxlength={320} value={props.typed?.email ?? ''} placeholder="ann@example.net" /></label>
          <label>First name <input type="text" name="first_name" maxlength={200} value={props.typed?.first_name ?? ''} /></label>
          <label>Last name <input type="text" name="last_name" maxlength={200} value={props.typed?.last_name ?? ''} /></label>
          <button type="submit">Add contact</button>
        </Form>
      </IfAllowed>
      {props.children}
      <form class="filters" method="get" action={p} id="contact-search">
        <label>Find an address
          <input type="search" name="email" value={props.search ?? ''} maxlength={320} placeholder="ann@example.net" />
        </label>
        <label>Segment
          <select name="segment">
            <option value="">All contacts</option>
            {props.segments.map((s) => <option value={s.id} selected={s.id === props.segmentId}>{s.name}</option>)}
          </select>
        </label>
        <button type="submit">Find</button>
        {(props.search || props.segmentId) && <a href={p}>Show all</a>}
      </form>
      <table id="contacts">
        <thead><tr><th>Email</th><th>Name</th><th>Segments</th><th>Subscribed</th><th>Added</th></tr></thead>
        <tbody>
          {props.contacts.map((c) => (
            <tr>
              <td><a href={`${p}/${c.id}`}>{c.email}</a></td>
              <td>{fullName(c)}</td>
              <td>{c.segmentIds.map((id) => segmentName.get(id) ?? id).join(', ') || '—'}</td>
              <td>{c.unsubscribed ? 'unsubscribed' : 'yes'}</td>
              <td>{when(c.createdAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.contacts.length === 0 && <p class="muted">{props.search || props.segmentId ? 'No contact matches.' : 'No contacts yet.'}</p>}
      <Pager path={p} query={{ email: props.search, segment: props.segmentId }} lastId={props.contacts.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
    </Layout>
  );
}

export function ContactPage(props: Base & {
  contact: ContactRow;
  properties: ContactPropertyRow[];
  segments: SegmentRow[];
  topics: ContactTopicRow[];
  error?: string;
}) {
  const c = props.contact;
  const p = `${BASE}/projects/${props.project.id}/contacts/${c.id}`;
  const inSegment = new Set(c.segmentIds);
  const others = props.segments.filter((s) => !inSegment.has(s.id));
  const value = (key: string) => (c.properties[key] === undefined ? '' : String(c.properties[key]));
  return (
    <Layout title={c.email} csrf={props.csrf} email={props.email} project={props.project}>
      <p><a href={`${BASE}/projects/${props.project.id}/contacts`}>All contacts</a> · <code>{c.id}</code> · added {when(c.createdAt)}</p>
      <ErrorNote message={props.error} />
      <h2>Details</h2>
      <Form action={p} csrf={props.csrf} readOnly>
        <p><label>First name <input type="text" name="first_name" maxlength={200} value={c.firstName ?? ''} /></label></p>
        <p><label>Last name <input type="text" name="last_name" maxlength={200} value={c.lastName ?? ''} /></label></p>
        <p><label><input type="checkbox" name="unsubscribed" value="on" checked={c.unsubscribed} /> Unsubscribed from every broadcast</label></p>
        {props.properties.length > 0 && (
          <table id="properties">
            <thead><tr><th>Property</th><th>Type</th><th>Value</th><th>Fallback</th></tr></thead>
            <tbody>
              {props.properties.map((prop) => (
                <tr>
                  <td><code>{prop.key}</code></td>
                  <td>{prop.type}</td>
                  <td><input type={prop.type === 'number' ? 'number' : 'text'} step="any" name={`prop.${prop.key}`} value={value(prop.key)} aria-label={prop.key} /></td>
                  <td>{prop.fallbackValue === null ? '—' : String(prop.fallbackValue)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        {props.properties.length === 0 && <p class="muted">No contact properties are declared in this project.</p>}
        <button type="submit">Save</button>
      </Form>

      <h2>Segments</h2>
      <table id="contact-segments">
        <tbody>
          {props.segments.filter((s) => inSegment.has(s.id)).map((s) => (
            <tr>
              <td>{s.name}</td>
              <td>
                <Form action={`${p}/segments/${s.id}/remove`} csrf={props.csrf} class="inline">
                  <button type="submit" aria-label={`Remove from ${s.name}`}>Remove</button>
                </Form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {c.segmentIds.length === 0 && <p class="muted">In no segment.</p>}
      {others.length > 0 && (
        <Form action={`${p}/segments`} csrf={props.csrf}>
          <select name="segment_id" aria-label="Segment to add to">
            {others.map((s) => <option value={s.id}>{s.name}</option>)}
          </select>{' '}
          <button type="submit">Add to segment</button>
        </Form>
      )}

      <h2>Topics</h2>
      {props.topics.length === 0 && <p class="muted">This project has no topics.</p>}
      {props.topics.length > 0 && (
        <Form action={`${p}/topics`} csrf={props.csrf} readOnly>
          <table id="contact-topics">
            <thead><tr><th>Topic</th><th>Default</th><th>Subscription</th></tr></thead>
            <tbody>
              {props.topics.map((t) => (
                <tr>
                  <td>{t.name}</td>
                  <td>{t.defaultSubscription}</td>
                  <td>
                    <select name={`topic.${t.id}`} aria-label={`Subscription to ${t.name}`}>
                      <option value="opt_in" selected={t.subscription === 'opt_in'}>opt_in</option>
                      <option value="opt_out" selected={t.subscription === 'opt_out'}>opt_out</option>
                    </select>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <button type="submit">Save subscriptions</button>
        </Form>
      )}

      <IfAllowed action={`${p}/delete`}>
        <h2>Delete</h2>
        <Form action={`${p}/delete`} csrf={props.csrf}>
          <button type="submit">Delete contact</button>
        </Form>
      </IfAllowed>
    </Layout>
  );
}

export function TopicsPage(props: Base & { topics: TopicRow[]; error?: string; typed?: Record<string, string> }) {
  const p = `${BASE}/projects/${props.project.id}/topics`;
  return (
    <Layout title="Topics" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">
        What contacts subscribe to. An <code>opt_in</code> topic reaches everyone but those who opted out; an <code>opt_out</code> topic
        only those who opted in. The default is fixed when the topic is made. Public topics are offered on the unsubscribe page.
      </p>
      <table id="topics">
        <thead><tr><th>Name</th><th>Description</th><th>Default</th><th>Visibility</th><th>Created</th><th></th></tr></thead>
        <tbody>
          {props.topics.map((t) => (
            <tr id={`topic-${t.id}`}>
              <td>{t.name}<br /><code class="muted">{t.id}</code></td>
              <td>{t.description ?? '—'}</td>
              <td>{t.defaultSubscription}</td>
              <td>{t.visibility}</td>
              <td>{when(t.createdAt)}</td>
              <td>
                <IfAllowed action={`${p}/${t.id}`}>
                  <details>
                    <summary>Edit</summary>
                    <Form action={`${p}/${t.id}`} csrf={props.csrf}>
                      <p><label>Name <input type="text" name="name" required maxlength={50} value={t.name} /></label></p>
                      <p><label>Description <input type="text" name="description" maxlength={200} value={t.description ?? ''} /></label></p>
                      <p><label>Visibility <select name="visibility">
                        <option value="private" selected={t.visibility === 'private'}>private</option>
                        <option value="public" selected={t.visibility === 'public'}>public</option>
                      </select></label></p>
                      <button type="submit">Save topic</button>
                    </Form>
                  </details>
                </IfAllowed>
                <Form action={`${p}/${t.id}/delete`} csrf={props.csrf} class="inline">
                  <button type="submit" aria-label={`Delete ${t.name}`}>Delete</button>
                </Form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.topics.length === 0 && <p class="muted">No topics yet.</p>}
      <IfAllowed action={p}>
        <h2>New topic</h2>
        <ErrorNote message={props.error} />
        <Form action={p} csrf={props.csrf}>
          <p><label>Name <input type="text" name="name" required maxlength={50} value={props.typed?.name ?? ''} /></label></p>
          <p><label>Description <input type="text" name="description" maxlength={200} value={props.typed?.description ?? ''} /></label></p>
          <p><label>Default subscription <select name="default_subscription">
            <option value="opt_in" selected={props.typed?.default_subscription !== 'opt_out'}>opt_in (everyone unless they opt out)</option>
            <option value="opt_out" selected={props.typed?.default_subscription === 'opt_out'}>opt_out (only those who opt in)</option>
          </select></label></p>
          <p><label>Visibility <select name="visibility">
            <option value="private" selected={props.typed?.visibility !== 'public'}>private</option>
            <option value="public" selected={props.typed?.visibility === 'public'}>public</option>
          </select></label></p>
          <button type="submit">Create topic</button>
        </Form>
      </IfAllowed>
    </Layout>
  );
}

export function SegmentsPage(props: Base & {
  segments: SegmentRow[];
  members: Map<string, number>;
  /** Counts stop here; a segment at the cap shows "cap+". */
  cap: number;
  hasMore: boolean;
  isFirst: boolean;
  error?: string;
  typed?: string;
}) {
  const p0 = `${BASE}/projects/${props.project.id}`;
  const p = `${p0}/segments`;
  const count = (id: string) => {
    const n = props.members.get(id) ?? 0;
    return n > props.cap ? `${props.cap.toLocaleString('en-US')}+` : n.toLocaleString('en-US');
  };
  return (
    <Layout title="Segments" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">Named groups of contacts; a broadcast goes to one segment.</p>
      <table id="segments">
        <thead><tr><th>Name</th><th>Contacts</th><th>Created</th><th></th></tr></thead>
        <tbody>
          {props.segments.map((s) => (
            <tr id={`segment-${s.id}`}>
              <td><a href={`${p0}/contacts?segment=${s.id}`}>{s.name}</a><br /><code class="muted">{s.id}</code></td>
              <td>{count(s.id)}</td>
              <td>{when(s.createdAt)}</td>
              <td>
                <Form action={`${p}/${s.id}`} csrf={props.csrf} class="inline">
                  <input type="text" name="name" required maxlength={200} value={s.name} aria-label={`New name for ${s.name}`} />{' '}
                  <button type="submit">Rename</button>
                </Form>{' '}
                <Form action={`${p}/${s.id}/delete`} csrf={props.csrf} class="inline">
                  <button type="submit" aria-label={`Delete ${s.name}`}>Delete</button>
                </Form>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.segments.length === 0 && <p class="muted">No segments yet.</p>}
      <Pager path={p} lastId={props.segments.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
      <IfAllowed action={p}>
        <h2>New segment</h2>
        <ErrorNote message={props.error} />
        <Form action={p} csrf={props.csrf}>
          <input type="text" name="name" required maxlength={200} value={props.typed ?? ''} aria-label="Segment name" />{' '}
          <button type="submit">Create segment</button>
        </Form>
      </IfAllowed>
    </Layout>
  );
}
