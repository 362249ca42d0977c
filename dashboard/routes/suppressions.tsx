import type { Context, Hono } from 'hono';
import { storedAddress } from '../../src/suppressions/address.ts';
import { getSuppression, listSuppressions } from '../../src/suppressions/queries.ts';
import { liftManually, suppressManually } from '../../src/suppressions/service.ts';
import { BASE, type DashEnv } from '../env.ts';
import { SuppressionsPage } from '../pages/suppressions.tsx';
import { base, errorPage, field, render } from '../render.tsx';

export const SUPPRESSIONS_PER_PAGE = 50;

type Shown = { error?: string; address?: string; status?: 200 | 422 };

/** The list (paged, or one address looked up) with whatever the last form left to say. */
async function showList(c: Context<DashEnv>, shown: Shown = {}) {
  const { sql } = c.var.deps;
  const projectId = c.var.project.id;
  const search = c.req.method === 'GET' ? c.req.query('email')?.trim() || undefined : undefined;
  const after = c.req.method === 'GET' ? c.req.query('after') || undefined : undefined;
  const afterAddress = after === undefined ? undefined : storedAddress(after);
  if (after !== undefined && !(afterAddress && (await getSuppression(sql, projectId, afterAddress)))) {
    return errorPage(c, 404, 'Not found', 'That page of suppressions does not exist.');
  }
  const address = search === undefined ? undefined : storedAddress(search);
  const page = search !== undefined && !address
    ? { rows: [], hasMore: false }
    : await listSuppressions(sql, projectId, { limit: SUPPRESSIONS_PER_PAGE, startingAfter: afterAddress, address });
  return render(
    c,
    <SuppressionsPage {...base(c)} suppressions={page.rows} hasMore={page.hasMore} isFirst={!after} search={search}
      error={shown.error} address={shown.address} />,
    shown.status ?? 200,
  );
}

export function registerSuppressionRoutes(app: Hono<DashEnv>) {
  const list = (c: Context<DashEnv>) => `${BASE}/projects/${c.var.project.id}/suppressions`;

  app.get('/projects/:projectId/suppressions', (c) => showList(c));

  app.post('/projects/:projectId/suppressions', async (c) => {
    const typed = field(await c.req.parseBody(), 'email');
    const address = storedAddress(typed);
    if (!address) return showList(c, { error: 'Enter an email address, such as ann@example.net.', address: typed, status: 422 });
    await suppressManually(c.var.deps.sql, c.var.project.id, address);
    return c.redirect(list(c), 303);
  });

  app.post('/projects/:projectId/suppressions/lift', async (c) => {
    const address = storedAddress(field(await c.req.parseBody(), 'email'));
    if (!address || !(await liftManually(c.var.deps.sql, c.var.project.id, address))) {
      return errorPage(c, 404, 'Not found', 'That address is not suppressed in this project.');
    }
    return c.redirect(list(c), 303);
  });
}
