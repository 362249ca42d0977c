import type { Hono } from 'hono';
import type { Sql } from '../../src/platform/db.ts';
import { createProject, type Project } from '../../src/projects/service.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { BASE, type DashEnv } from '../env.ts';
import { ProjectsPage } from '../pages/projects.tsx';
import { field, render } from '../render.tsx';

/** The team runs the whole instance, so this one list is not scoped to a project. */
async function listProjects(sql: Sql) {
  return sql<Project[]>`select id, name, created_at from projects order by id desc`;
}

export function registerProjectRoutes(app: Hono<DashEnv>) {
  app.get('/', async (c) => {
    const projects = await listProjects(c.var.deps.sql);
    return render(c, <ProjectsPage csrf={c.var.csrf} email={c.var.member!.email} projects={projects} />);
  });

  app.post('/projects', async (c) => {
    const { sql } = c.var.deps;
    try {
      const project = await createProject(sql, field(await c.req.parseBody(), 'name'));
      return c.redirect(`${BASE}/projects/${project.id}/keys`, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      const projects = await listProjects(sql);
      return render(c, <ProjectsPage csrf={c.var.csrf} email={c.var.member!.email} projects={projects} error={err.message} />, 422);
    }
  });
}
