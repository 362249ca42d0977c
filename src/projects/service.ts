import type { Sql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { ServiceError } from '../platform/errors.ts';
import { recordAudit } from '../audit/record.ts';

export type Project = { id: string; name: string; createdAt: Date };


export async function createProject(sql: Sql, name: string): Promise<Project> {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 200) throw new ServiceError('invalid_input', 'project name must be 1 to 200 characters');
  return sql.begin(async (tx) => {
    const [project] = await tx<Project[]>`
      insert into projects (id, name) values (${newId('project')}, ${trimmed})
      returning id, name, created_at`;
    await recordAudit(tx, { action: 'project.created', projectId: project!.id, target: { type: 'project', id: project!.id }, changes: { name: trimmed } });
    return project!;
  });
}

export async function getProject(sql: Sql, projectId: string): Promise<Project | undefined> {
  const [project] = await sql<[Project?]>`select id, name, created_at from projects where id = ${projectId}`;
  return project;
}

/** Raises when the project does not exist, so CLI and dashboard callers get a clear message. */
export async function requireProject(sql: Sql, projectId: string): Promise<Project> {
  const project = await getProject(sql, projectId);
  if (!project) throw new ServiceError('not_found', `project ${projectId} not found`);
  return project;
}
