import type { Project } from '../../src/projects/service.ts';
import type { TemplateRow } from '../../src/templates/queries.ts';
import { BASE } from '../env.ts';
import { ErrorNote, Form, IfAllowed, Layout, when } from '../layout.tsx';

type Base = { csrf: string; email: string; project: Project };

const statusOf = (t: TemplateRow) => (t.publishedVersionId ? 'published' : 'draft');

export function TemplatesPage(props: Base & { templates: TemplateRow[]; error?: string; typed?: { name?: string; alias?: string; html?: string } }) {
  const p = `${BASE}/projects/${props.project.id}/templates`;
  return (
    <Layout title="Templates" csrf={props.csrf} email={props.email} project={props.project}>
      <p class="muted">Handlebars templates with declared variables. Sends use the published version; edits wait in the draft until you publish.</p>
      <table id="templates">
        <thead><tr><th>Name</th><th>Alias</th><th>Status</th><th>Version</th><th>Updated</th></tr></thead>
        <tbody>
          {props.templates.map((t) => (
            <tr>
              <td><a href={`${p}/${t.id}`}>{t.name}</a></td>
              <td>{t.alias ? <code>{t.alias}</code> : '—'}</td>
              <td>{statusOf(t)}{t.hasUnpublishedVersions ? ' (unpublished edits)' : ''}</td>
              <td>{t.currentVersion}</td>
              <td>{when(t.updatedAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {props.templates.length === 0 && <p class="muted">No templates yet.</p>}
      <IfAllowed action={p}>
      <h2>New template</h2>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf}>
        <p><label>Name <input type="text" name="name" required maxlength={200} value={props.typed?.name ?? ''} /></label></p>
        <p><label>Alias (optional; a-z, 0-9, - and _) <input type="text" name="alias" maxlength={64} value={props.typed?.alias ?? ''} /></label></p>
        <p><label>HTML<br /><textarea name="html" rows={6} cols={80} required>{props.typed?.html ?? '<p>Hello</p>'}</textarea></label></p>
        <button type="submit">Create template</button>
      </Form>
      </IfAllowed>
    </Layout>
  );
}

export type Preview = { values: Record<string, string>; subject?: string | null; text?: string | null; hasHtml: boolean; error?: string; query: string };

/** One template: its draft in a form, a preview with sample values, publishing and the versions. */
export function TemplatePage(props: Base & {
  template: TemplateRow;
  versions: { id: string; version: number; publishedAt: Date }[];
  preview: Preview;
  error?: string;
  typed?: Record<string, string>;
  published?: boolean;
}) {
  const t = props.template;
  const p = `${BASE}/projects/${props.project.id}/templates/${t.id}`;
  const typed = props.typed;
  const value = (name: string, stored: string | null) => (typed ? typed[name] ?? '' : stored ?? '');
  return (
    <Layout title={t.name} csrf={props.csrf} email={props.email} project={props.project}>
      <table id="template-fields">
        <tbody>
          <tr><th>Id</th><td><code>{t.id}</code></td></tr>
          <tr><th>Alias</th><td>{t.alias ? <code>{t.alias}</code> : '—'}</td></tr>
          <tr><th>Status</th><td id="template-status">{statusOf(t)}</td></tr>
          <tr><th>Draft version</th><td id="template-version">{t.currentVersion}{t.hasUnpublishedVersions ? ' (unpublished edits)' : ''}</td></tr>
          <tr><th>Published</th><td>{when(t.publishedAt)}</td></tr>
        </tbody>
      </table>
      {props.published && <p class="note" id="published-note">Published: sends now use version {t.currentVersion}.</p>}
      {(t.hasUnpublishedVersions || !t.publishedVersionId) && (
        <Form action={`${p}/publish`} csrf={props.csrf}><button type="submit">Publish version {t.currentVersion}</button></Form>
      )}

      <h2>Preview</h2>
      <form class="filters" method="get" action={p} id="preview-form">
        {t.variables.map((v) => (
          <label>{v.key} ({v.type}{v.fallback_value !== null ? `, fallback ${v.fallback_value}` : ''})
            <input type="text" name={`sample.${v.key}`} value={props.preview.values[v.key] ?? ''} />
          </label>
        ))}
        <button type="submit">Preview</button>
      </form>
      <ErrorNote message={props.preview.error} />
      {!props.preview.error && (
        <>
          <p>Subject: <strong id="preview-subject">{props.preview.subject ?? '(none)'}</strong></p>
          {props.preview.hasHtml && <iframe sandbox="" src={`${p}/preview${props.preview.query}`} title="HTML preview" referrerpolicy="no-referrer"></iframe>}
          {props.preview.text ? <pre id="preview-text">{props.preview.text}</pre> : <p class="muted">No text part.</p>}
        </>
      )}

      <h2>Edit the draft</h2>
      <ErrorNote message={props.error} />
      <Form action={p} csrf={props.csrf} readOnly>
        <p><label>Name <input type="text" name="name" required maxlength={200} value={value('name', t.name)} /></label></p>
        <p><label>Alias <input type="text" name="alias" maxlength={64} value={value('alias', t.alias)} /></label></p>
        <p><label>From <input type="text" name="from" maxlength={320} value={value('from', t.fromAddress)} /></label></p>
        <p><label>Subject <input type="text" name="subject" maxlength={998} value={value('subject', t.subject)} /></label></p>
        <p><label>HTML<br /><textarea name="html" rows={10} cols={80}>{value('html', t.html)}</textarea></label></p>
        <p><label>Text<br /><textarea name="text" rows={6} cols={80}>{value('text', t.text)}</textarea></label></p>
        <p><label>Variables (JSON: key, type string or number, fallback_value)<br />
          <textarea name="variables" rows={4} cols={80}>{typed ? typed.variables ?? '' : JSON.stringify(t.variables)}</textarea></label></p>
        <button type="submit">Save draft</button>
      </Form>

      <h2>Versions</h2>
      {props.versions.length === 0 ? <p class="muted">Not published yet: sends with this template are refused until it is.</p> : (
        <table id="versions">
          <thead><tr><th>Version</th><th>Published</th></tr></thead>
          <tbody>{props.versions.map((v) => <tr><td>{v.version}</td><td>{when(v.publishedAt)}</td></tr>)}</tbody>
        </table>
      )}
      <p><a href={`${BASE}/projects/${props.project.id}/templates`}>Back to templates</a></p>
    </Layout>
  );
}
