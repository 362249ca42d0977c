import type { Command } from '../commands.ts';
import { required } from '../commands.ts';
import { createLogger } from '../platform/log.ts';
import { requireProject } from '../projects/service.ts';
import { getReputation, resumeSending } from './service.ts';

/** The operator CLI's `reputation …` commands; the same service calls as the API and the dashboard. */
export const REPUTATION_COMMANDS: Record<string, Command> = {
  'reputation show': {
    usage: 'reputation show --project P',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      const projectId = required(v, 'project', this.usage);
      await requireProject(ctx.sql(), projectId);
      return { project: projectId, ...(await getReputation(ctx.sql(), projectId)) };
    },
  },
  'reputation resume': {
    usage: 'reputation resume --project P',
    options: { project: { type: 'string' } },
    async run(ctx, v) {
      const projectId = required(v, 'project', this.usage);
      await requireProject(ctx.sql(), projectId);
      const { resumed, released } = await resumeSending(ctx.sql(), createLogger('silent'), projectId);
      return { project: projectId, resumed, released };
    },
  },
};
