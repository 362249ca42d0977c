import type { Context, Hono } from 'hono';
import { ApiError, ValidationError } from '../../src/http/errors.ts';
import { listTemplates } from '../../src/templates/queries.ts';
import { createTemplate, listTemplateVersions, publishTemplate, renderTemplate, updateTemplate } from '../../src/templates/service.ts';
import type { TemplateRow } from '../../src/templates/queries.ts';
import { BASE, type DashEnv } from '../env.ts';
import { TemplatePage, TemplatesPage, type Preview } from '../pages/templates.tsx';
import { base, errorPage, field, render } from '../render.tsx';
import { urlId } from '../params.ts';
import { CAUGHT_HTML_CSP } from './inbox.tsx';

const problems = (err: ValidationError) => err.detail.map((d) => `${d.loc.filter((p) => p !== 'body').join('.') || 'template'}: ${d.msg}`).join(' ');
const orNull = (s: string) => (s === '' ? null : s);

/** Sample values from the preview form's query (`sample.KEY`), typed as each variable is declared. */
function samples(c: Context<DashEnv>, t: TemplateRow) {
  const shown: Record<string, string> = {};
  const values: Record<string, string | number> = {};
  const query = new URLSearchParams();
  for (const v of t.variables) {
    const raw = c.req.query(`sample.${v.key}`);
    if (raw === undefined || raw === '') continue;
    shown[v.key] = raw;
    query.set(`sample.${v.key}`, raw);
    values[v.key] = v.type === 'number' && raw.trim() !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  }
  const qs = query.toString();
  return { shown, values, query: qs ? `?${qs}` : '' };
}

async function preview(c: Context<DashEnv>, t: TemplateRow): Promise<Preview & { html?: string | null }> {
  const { shown, values, query } = samples(c, t);
  try {
    const out = await renderTemplate(c.var.deps.sql, c.var.project.id, t.id, { variables: values }, c.var.deps.config.emailMaxMessageBytes);
    return { values: shown, query, subject: out.subject, text: out.text, html: out.html, hasHtml: Boolean(out.html) };
  } catch (err) {
    // The project's renders are queued past their bound (§22.8): the page shows, without a preview.
    if (err instanceof ApiError && err.type === 'rate_limit_exceeded') return { values: shown, query, hasHtml: false, error: 'Too many renders of this project are waiting; reload in a moment for the preview.' };
    if (!(err instanceof ValidationError)) throw err;
    return { values: shown, query, hasHtml: false, error: `The preview needs other values: ${problems(err)}` };
  }
}

async function showTemplate(c: Context<DashEnv>, t: TemplateRow, extra: { error?: string; typed?: Record<string, string>; published?: boolean; status?: 200 | 422 } = {}) {
  const { versions } = await listTemplateVersions(c.var.deps.sql, c.var.project.id, t.id);
  const { html: _html, ...shown } = await preview(c, t);
  return render(c, <TemplatePage {...base(c)} template={t} versions={versions} preview={shown} error={extra.error} typed={extra.typed} published={extra.published} />, extra.status ?? 200);
}

/** The templates page: list and create; a template's page: edit the draft, preview, publish, versions. */
export function registerTemplateRoutes(app: Hono<DashEnv>) {
  const listPath = (c: Context<DashEnv>) => `${BASE}/projects/${c.var.project.id}/templates`;

  app.get('/projects/:projectId/templates', async (c) => {
    const page = await listTemplates(c.var.deps.sql, c.var.project.id, { limit: 100 });
    return render(c, <TemplatesPage {...base(c)} templates={page.rows} />);
  });

  app.post('/projects/:projectId/templates', async (c) => {
    const body = await c.req.parseBody();
    const typed = { name: field(body, 'name'), alias: field(body, 'alias'), html: field(body, 'html') };
    try {
      const t = await createTemplate(c.var.deps.sql, c.var.project.id, { name: typed.name, alias: orNull(typed.alias.trim()), html: typed.html });
      return c.redirect(`${listPath(c)}/${t.id}`, 303);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      const page = await listTemplates(c.var.deps.sql, c.var.project.id, { limit: 100 });
      return render(c, <TemplatesPage {...base(c)} templates={page.rows} error={problems(err)} typed={typed} />, 422);
    }
  });

  app.get('/projects/:projectId/templates/:templateId', async (c) => {
    const { template } = await listTemplateVersions(c.var.deps.sql, c.var.project.id, urlId(c, 'templateId', 'template'));
    return showTemplate(c, template, { published: c.req.query('published') === '1' });
  });

  app.post('/projects/:projectId/templates/:templateId', async (c) => {
    const id = urlId(c, 'templateId', 'template');
    const body = await c.req.parseBody();
    const typed = Object.fromEntries(['name', 'alias', 'from', 'subject', 'html', 'text', 'variables'].map((k) => [k, field(body, k)]));
    try {
      let variables: unknown;
      try {
        variables = typed.variables!.trim() === '' ? [] : JSON.parse(typed.variables!);
      } catch {
        throw new ValidationError([{ loc: ['body', 'variables'], msg: 'Variables must be JSON, such as [{"key":"name","type":"string"}]', type: 'json_invalid' }]);
      }
      await updateTemplate(c.var.deps.sql, c.var.project.id, id, {
        name: typed.name, alias: orNull(typed.alias!.trim()), from: orNull(typed.from!.trim()), subject: orNull(typed.subject!),
        html: typed.html, text: orNull(typed.text!), variables,
      });
      return c.redirect(`${listPath(c)}/${id}`, 303);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      const { template } = await listTemplateVersions(c.var.deps.sql, c.var.project.id, id);
      return showTemplate(c, template, { error: problems(err), typed, status: 422 });
    }
  });

  app.post('/projects/:projectId/templates/:templateId/publish', async (c) => {
    const t = await publishTemplate(c.var.deps.sql, c.var.project.id, urlId(c, 'templateId', 'template'));
    return c.redirect(`${listPath(c)}/${t.id}?published=1`, 303);
  });

  /** The draft's HTML with sample values, framed like caught mail: sandboxed, under its own CSP. */
  app.get('/projects/:projectId/templates/:templateId/preview', async (c) => {
    const { template } = await listTemplateVersions(c.var.deps.sql, c.var.project.id, urlId(c, 'templateId', 'template'));
    const out = await preview(c, template);
    if (out.error || !out.html) return errorPage(c, 422, 'No preview', out.error ?? 'The draft renders no HTML.');
    c.header('Content-Security-Policy', CAUGHT_HTML_CSP);
    c.header('Content-Type', 'text/html; charset=utf-8');
    return c.body(out.html, 200);
  });
}
