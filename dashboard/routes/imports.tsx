import type { Hono } from 'hono';
import { ApiError, ValidationError } from '../../src/http/errors.ts';
import { multipartSource } from '../../src/contacts/imports/multipart.ts';
import { createImport } from '../../src/contacts/imports/service.ts';
import { getImport } from '../../src/contacts/imports/queries.ts';
import { BASE, type DashEnv } from '../env.ts';
import { ImportPage, IMPORT_COUNTS, importDone, importPercent } from '../pages/imports.tsx';
import { errorPage, base, render } from '../render.tsx';
import { urlId } from '../params.ts';
import { progressStream } from '../live.ts';
import { problemsOf, showContacts } from './contacts.tsx';

/** The one dashboard form read as a stream, not through the 64 KiB form limit (app.tsx). */
export const STREAMED_UPLOAD = /^\/dashboard\/projects\/[^/]+\/imports$/;

/** Contact imports: the Contacts page's upload, and an import's page with its live progress. */
export function registerImportRoutes(app: Hono<DashEnv>) {
  app.post('/projects/:projectId/imports', async (c) => {
    const { sql, config } = c.var.deps;
    try {
      const source = await multipartSource(c, config.contactImportMaxBytes);
      const created = await createImport(sql, c.var.project.id, source, config.contactImportMaxBytes);
      return c.redirect(`${BASE}/projects/${c.var.project.id}/imports/${created.id}`, 303);
    } catch (err) {
      if (err instanceof ApiError && err.type === 'payload_too_large') return errorPage(c, 413, 'Too large', err.message);
      if (!(err instanceof ValidationError)) throw err;
      return showContacts(c, { importError: problemsOf(err), status: 422 });
    }
  });

  app.get('/projects/:projectId/imports/:importId', async (c) => {
    const row = await getImport(c.var.deps.sql, c.var.project.id, urlId(c, 'importId', 'contactImport'));
    if (!row) return errorPage(c, 404, 'Not found', 'There is no such import in this project.');
    return render(c, <ImportPage {...base(c)} imported={row} />);
  });

  app.get('/projects/:projectId/imports/:importId/live', async (c) => {
    const { sql } = c.var.deps;
    const projectId = c.var.project.id;
    const id = urlId(c, 'importId', 'contactImport');
    if (!(await getImport(sql, projectId, id))) return errorPage(c, 404, 'Not found', 'There is no such import in this project.');
    return progressStream(c, `import:${id}`, async () => {
      const row = await getImport(sql, projectId, id);
      return row && {
        status: row.status, percent: importPercent(row), done: importDone(row),
        counts: Object.fromEntries(IMPORT_COUNTS.map((k) => [k, row[k]])),
      };
    });
  });
}
