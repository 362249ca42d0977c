import type { Project } from '../../src/projects/service.ts';
import type { ImportRow } from '../../src/contacts/imports/queries.ts';
import type { SegmentRow } from '../../src/segments/queries.ts';
import { BASE } from '../env.ts';
import { CSRF_FIELD } from '../csrf.ts';
import { ErrorNote, IfAllowed, Layout, when } from '../layout.tsx';
import { LIVE_PROGRESS_SCRIPT_PATH } from '../routes/assets.ts';

type Base = { csrf: string; email: string; project: Project };

export const IMPORT_COUNTS = ['total', 'created', 'updated', 'skipped', 'failed'] as const;

export const importDone = (i: ImportRow) => i.status === 'completed' || i.status === 'failed';

/** How far into the file the import is, in whole percent (100 once it has ended). */
export function importPercent(i: ImportRow): number {
  if (i.status === 'completed') return 100;
  return i.bytesTotal > 0 ? Math.min(100, Math.floor((i.bytesDone / i.bytesTotal) * 100)) : 0;
}

/**
 * The upload form of the Contacts page. It is multipart and streamed past the dashboard's 64 KiB
 * form limit, so its CSRF token rides in the action's query string (the body is never buffered to
 * look for it); the Origin check applies as to every form.
 */
export function ImportForm(props: { project: Project; csrf: string; segments: SegmentRow[]; maxBytes: number; error?: string; recent: ImportRow[] }) {
  const p = `${BASE}/projects/${props.project.id}/imports`;
  return (
    <>
      <IfAllowed action={p}>
        <h2>Import a CSV</h2>
        <p class="muted">
          A header line, then one contact a line: columns named <code>email</code> (required), <code>first_name</code>,{' '}
          <code>last_name</code>, <code>unsubscribed</code> and any declared property&apos;s key. At most {Math.floor(props.maxBytes / 1048576).toLocaleString('en-US')} MiB.
        </p>
        <ErrorNote message={props.error} />
        <form method="post" action={`${p}?${CSRF_FIELD}=${props.csrf}`} enctype="multipart/form-data" class="filters" id="import-form">
          <label>CSV file <input type="file" name="file" accept=".csv,text/csv" required /></label>
          <label>Add every contact to
            <select name="segments">
              <option value="">no segment</option>
              {props.segments.map((s) => <option value={JSON.stringify([s.id])}>{s.name}</option>)}
            </select>
          </label>
          <label>An address already a contact
            <select name="on_conflict">
              <option value="upsert">is updated</option>
              <option value="skip">is left alone</option>
            </select>
          </label>
          <button type="submit">Import</button>
        </form>
      </IfAllowed>
      {props.recent.length > 0 && (
        <>
          <h2>Recent imports</h2>
          <table id="imports">
            <thead><tr><th>Import</th><th>Status</th><th>Rows</th><th>Failed</th><th>Started</th></tr></thead>
            <tbody>
              {props.recent.map((i) => (
                <tr>
                  <td><a href={`${p}/${i.id}`}><code>{i.id}</code></a></td>
                  <td>{i.status}</td>
                  <td>{i.total}</td>
                  <td>{i.failed}</td>
                  <td>{when(i.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </>
  );
}

export function ImportPage(props: Base & { imported: ImportRow }) {
  const i = props.imported;
  const p0 = `${BASE}/projects/${props.project.id}`;
  const done = importDone(i);
  const percent = importPercent(i);
  return (
    <Layout title="Contact import" csrf={props.csrf} email={props.email} project={props.project}
      scripts={done ? [] : [LIVE_PROGRESS_SCRIPT_PATH]} refreshSeconds={done ? undefined : 2}>
      <p><a href={`${p0}/contacts`}>Contacts</a> · <code>{i.id}</code> · uploaded {when(i.createdAt)}</p>
      <p>Status: <strong id="progress-status">{i.status}</strong>{i.completedAt && <> · ended {when(i.completedAt)}</>}</p>
      <p>
        <progress id="import-progress" max={100} value={percent} data-live={done ? undefined : `${p0}/imports/${i.id}/live`}>{percent}%</progress>{' '}
        <span class="muted">{percent}% of the file</span>
      </p>
      {i.failureReason && <p class="error" role="alert">{i.failureReason}</p>}
      <div class="stats" id="import-counts">
        {IMPORT_COUNTS.map((k) => <div class="stat"><b data-count={k}>{i[k]}</b>{k}</div>)}
      </div>
      <h2>Rows refused</h2>
      {i.errors.length === 0
        ? <p class="muted">None{done ? '' : ' so far'}.</p>
        : (
          <table id="import-errors">
            <thead><tr><th>Line</th><th>Reason</th></tr></thead>
            <tbody>{i.errors.map((e) => <tr><td>{e.line}</td><td>{e.reason}</td></tr>)}</tbody>
          </table>
        )}
      {i.failed > i.errors.length && <p class="muted">The first {i.errors.length} of {i.failed} are listed.</p>}
    </Layout>
  );
}
