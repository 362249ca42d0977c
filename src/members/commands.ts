import { JsonLines, type Command } from '../commands.ts';
import type { Config } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';
import { createInvitation } from './invitations.ts';
import { listMembers } from './queries.ts';
import { ROLES } from './roles.ts';

/** The operator CLI's `member …` commands: the operator invites as the instance's own hand, any role. */

/** Links point at PUBLIC_BASE_URL; without it, at the API on this machine. */
function baseUrl(config: Config): string {
  return config.publicBaseUrl ?? `http://${config.host === '0.0.0.0' || config.host === '::' ? 'localhost' : config.host}:${config.port}`;
}

export const MEMBER_COMMANDS: Record<string, Command> = {
  'member invite': {
    usage: `member invite --email EMAIL --role ${ROLES.join('|')}`,
    options: { email: { type: 'string' }, role: { type: 'string' } },
    run(ctx, v) {
      for (const name of ['email', 'role']) {
        if (typeof v[name] !== 'string' || v[name] === '') throw new ServiceError('invalid_input', `--${name} is required: ${this.usage}`);
      }
      return createInvitation(ctx.sql(), { email: v.email as string, role: v.role as string, invitedBy: null, baseUrl: baseUrl(ctx.config) });
    },
  },
  'member list': {
    usage: 'member list',
    async run(ctx) {
      const members = await listMembers(ctx.sql());
      return new JsonLines(members.map((m) => ({ id: m.id, email: m.email, role: m.role, last_sign_in_at: m.lastSignInAt?.toISOString() ?? null })));
    },
  },
};
