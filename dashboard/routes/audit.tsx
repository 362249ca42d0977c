import type { Hono } from 'hono';
import type { Project } from '../../src/projects/service.ts';
import { AUDIT_ACTIONS } from '../../src/audit/record.ts';
import { auditEntryExists, listAudit, listAuditActors, type AuditFilter } from '../../src/audit/queries.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import type { DashEnv } from '../env.ts';
import { AuditPage } from '../pages/audit.tsx';
import { errorPage, render } from '../render.tsx';

export const AUDIT_PER_PAGE = 50;
const ACTOR_TYPES = ['member', 'api_key', 'cli', 'system'] as const;

/** The whole instance's log: owners and admins read it across projects, filtered. */
export function registerAuditRoutes(app: Hono<DashEnv>) {
  app.get('/audit', async (c) => {
    const { sql } = c.var.deps;
    const project = c.req.query('project') || undefined;
    const actor = c.req.query('actor') || undefined;
    const action = c.req.query('action') || undefined;
    const after = c.req.query('after') || undefined;
    const filter: AuditFilter = { limit: AUDIT_PER_PAGE };
    if (project !== undefined) {
      if (project !== 'none' && !isWellFormedId('project', project)) return errorPage(c, 404, 'Not found', 'There is no such project.');
      filter.projectId = project === 'none' ? null : project;
    }
    if (actor !== undefined) {
      const i = actor.indexOf(':');
      const type = actor.slice(0, Math.max(i, 0));
      if (i < 0 || !(ACTOR_TYPES as readonly string[]).includes(type) || actor.length > 200) return errorPage(c, 404, 'Not found', 'There is no such actor.');
      filter.actorType = type as AuditFilter['actorType'];
      if (actor.slice(i + 1)) filter.actorId = actor.slice(i + 1);
    }
    if (action !== undefined) {
      if (!(AUDIT_ACTIONS as readonly string[]).includes(action)) return errorPage(c, 404, 'Not found', 'There is no such action.');
      filter.action = action;
    }
    if (after !== undefined) {
      if (!(isWellFormedId('audit', after) && (await auditEntryExists(sql, after)))) return errorPage(c, 404, 'Not found', 'That page of the audit log does not exist.');
      filter.startingAfter = after;
    }
    const [page, projects, actors] = await Promise.all([
      listAudit(sql, filter),
      sql<Project[]>`select id, name, created_at from projects order by name, id`,
      listAuditActors(sql),
    ]);
    return render(c, <AuditPage csrf={c.var.csrf} email={c.var.session!.email} entries={page.rows} hasMore={page.hasMore} isFirst={!after}
      filters={{ project, actor, action }} projects={projects} actors={actors} actions={AUDIT_ACTIONS} />);
  });
}
