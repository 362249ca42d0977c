import type { AuditRow } from '../../src/audit/queries.ts';
import type { Actor } from '../../src/audit/actor.ts';
import type { Project } from '../../src/projects/service.ts';
import { BASE } from '../env.ts';
import { Layout, Pager, when } from '../layout.tsx';

export type AuditFilters = { project?: string; actor?: string; action?: string };
export type ActorOption = { actorType: Actor['type']; actorId: string | null; actorLabel: string | null };

/** The value an actor has in the filter: its type and id. */
export const actorValue = (a: { actorType: string; actorId: string | null }) => `${a.actorType}:${a.actorId ?? ''}`;

/** `changes` as one short line: `name: "x", enabled: false`. */
function changesText(changes: Record<string, unknown> | null): string {
  if (!changes) return '—';
  return Object.entries(changes).map(([k, v]) => `${k}: ${JSON.stringify(v)}`).join(', ');
}

export function AuditPage(props: {
  csrf: string;
  email: string;
  entries: AuditRow[];
  hasMore: boolean;
  isFirst: boolean;
  filters: AuditFilters;
  projects: Project[];
  actors: ActorOption[];
  actions: readonly string[];
}) {
  const path = `${BASE}/audit`;
  const names = new Map(props.projects.map((p) => [p.id, p.name]));
  const f = props.filters;
  return (
    <Layout title="Audit log" csrf={props.csrf} email={props.email}>
      <p class="muted">Every change made through the dashboard, the API or the CLI, newest first. Entries are never edited or deleted.</p>
      <form class="filters" method="get" action={path}>
        <label>Project
          <select name="project">
            <option value="">Any</option>
            <option value="none" selected={f.project === 'none'}>The instance (no project)</option>
            {props.projects.map((p) => <option value={p.id} selected={f.project === p.id}>{p.name}</option>)}
          </select>
        </label>
        <label>Actor
          <select name="actor">
            <option value="">Anyone</option>
            {props.actors.map((a) => (
              <option value={actorValue(a)} selected={f.actor === actorValue(a)}>{a.actorType}: {a.actorLabel ?? a.actorId ?? '—'}</option>
            ))}
          </select>
        </label>
        <label>Action
          <select name="action">
            <option value="">Any</option>
            {props.actions.map((a) => <option value={a} selected={f.action === a}>{a}</option>)}
          </select>
        </label>
        <button type="submit">Filter</button>
        {(f.project || f.actor || f.action) && <a href={path}>Show all</a>}
      </form>
      <table id="audit">
        <thead><tr><th>When</th><th>Actor</th><th>Action</th><th>Project</th><th>Target</th><th>Changes</th><th>Address</th></tr></thead>
        <tbody>
          {props.entries.map((e) => (
            <tr>
              <td>{when(e.at)}</td>
              <td>{e.actorType}: {e.actorLabel ?? e.actorId ?? '—'}</td>
              <td><code>{e.action}</code></td>
              <td>{e.projectId ? <a href={`${BASE}/projects/${e.projectId}`}>{names.get(e.projectId) ?? e.projectId}</a> : '—'}</td>
              <td>{e.targetType} <code>{e.targetId ?? ''}</code></td>
              <td>{changesText(e.changes)}</td>
              <td>{e.ip ?? '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.entries.length === 0 && <p class="muted">No entries{f.project || f.actor || f.action ? ' match these filters' : ''}.</p>}
      <Pager path={path} query={f} lastId={props.entries.at(-1)?.id} hasMore={props.hasMore} isFirst={props.isFirst} />
    </Layout>
  );
}
