import { ServiceError } from '../platform/errors.ts';
import { isWellFormedId } from '../platform/ids.ts';
import { JsonLines, type Command } from '../commands.ts';
import { listAudit, toAuditEntry } from './queries.ts';

export const AUDIT_COMMANDS: Record<string, Command> = {
  'audit list': {
    usage: 'audit list [--project ID] [--limit N]',
    options: { project: { type: 'string' }, limit: { type: 'string' } },
    async run(ctx, v) {
      const limit = v.limit === undefined ? 100 : Number(v.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new ServiceError('invalid_input', `--limit takes 1 to 10000: ${this.usage}`);
      const project = v.project as string | undefined;
      if (project !== undefined && !isWellFormedId('project', project)) throw new ServiceError('invalid_input', `--project takes a project id (proj_…): ${this.usage}`);
      const page = await listAudit(ctx.sql(), { limit, projectId: project });
      return new JsonLines(page.rows.map(toAuditEntry));
    },
  },
};
