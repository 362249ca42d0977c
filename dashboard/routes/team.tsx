import type { Context, Hono } from 'hono';
import { listMembers, listOpenInvitations, getMember } from '../../src/members/queries.ts';
import { changeRole, removeMember } from '../../src/members/service.ts';
import { createInvitation, getOpenInvitation, InvitationRefused, withdrawInvitation } from '../../src/members/invitations.ts';
import { isRole, ROLES, type Role } from '../../src/members/roles.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { forbidden } from '../authorize.ts';
import { expectedOrigin } from '../csrf.ts';
import { BASE, type DashEnv } from '../env.ts';
import { urlId } from '../params.ts';
import { allows } from '../permissions.ts';
import { InvitedPage, TeamPage } from '../pages/team.tsx';
import { errorPage, field, render } from '../render.tsx';

/**
 * The Team page. The route table lets owners and admins post here at all; owners.manage, from
 * the same table, decides who may give, take or withdraw the owner role.
 */

/** The roles the signed-in member may hand out, and whose holders they may change. */
function assignable(c: Context<DashEnv>): readonly Role[] {
  const { role } = c.var.member!;
  if (!allows(role, 'members.manage')) return [];
  return allows(role, 'owners.manage') ? ROLES : ROLES.filter((r) => !allows(r, 'owners.manage'));
}

/** Whether the signed-in member may touch a member or invitation holding `role`, or give it. */
const mayHandle = (c: Context<DashEnv>, role: Role) => assignable(c).includes(role);

async function showTeam(c: Context<DashEnv>, extra: { error?: string; typed?: { email?: string; role?: string } } = {}, status: 200 | 409 | 422 = 200) {
  const { sql } = c.var.deps;
  const [members, invitations] = await Promise.all([listMembers(sql), listOpenInvitations(sql)]);
  return render(c, <TeamPage csrf={c.var.csrf} email={c.var.member!.email} memberId={c.var.member!.id}
    members={members} invitations={invitations} assignable={assignable(c)} {...extra} />, status);
}

/** After a change: the team page, or sign-in when the member changed themselves out of it. */
function afterChange(c: Context<DashEnv>, memberId: string) {
  return c.redirect(memberId === c.var.member!.id ? `${BASE}/login` : `${BASE}/team`, 303);
}

export function registerTeamRoutes(app: Hono<DashEnv>) {
  app.get('/team', (c) => showTeam(c));

  app.post('/team/invitations', async (c) => {
    const body = await c.req.parseBody();
    const email = field(body, 'email');
    const role = field(body, 'role');
    if (isRole(role) && !mayHandle(c, role)) return forbidden(c, 'owners.manage');
    try {
      const invitation = await createInvitation(c.var.deps.sql, {
        email, role, invitedBy: c.var.member!.id, baseUrl: c.var.deps.config.publicBaseUrl ?? expectedOrigin(c), handles: assignable(c),
      });
      return render(c, <InvitedPage csrf={c.var.csrf} email={c.var.member!.email} invitation={invitation} />);
    } catch (err) {
      // Replacing an owner's open invitation is an owner's to do, as withdrawing it is.
      if (err instanceof InvitationRefused) return forbidden(c, 'owners.manage');
      if (!(err instanceof ServiceError)) throw err;
      return showTeam(c, { error: err.message, typed: { email: email.slice(0, 254), role } }, err.code === 'conflict' ? 409 : 422);
    }
  });

  app.post('/team/invitations/:invitationId/withdraw', async (c) => {
    const id = urlId(c, 'invitationId', 'invitation');
    const invitation = await getOpenInvitation(c.var.deps.sql, id);
    if (!invitation) return errorPage(c, 404, 'Not found', 'There is no such open invitation.');
    if (!mayHandle(c, invitation.role)) return forbidden(c, 'owners.manage');
    try {
      await withdrawInvitation(c.var.deps.sql, id, assignable(c));
    } catch (err) {
      if (err instanceof InvitationRefused) return forbidden(c, 'owners.manage');
      if (err instanceof ServiceError && err.code === 'not_found') return errorPage(c, 404, 'Not found', err.message);
      throw err;
    }
    return c.redirect(`${BASE}/team`, 303);
  });

  app.post('/team/:memberId/role', async (c) => {
    const id = urlId(c, 'memberId', 'member');
    const role = field(await c.req.parseBody(), 'role');
    if (!isRole(role)) return showTeam(c, { error: `The role must be one of ${ROLES.join(', ')}.` }, 422);
    const member = await getMember(c.var.deps.sql, id);
    if (!member) return errorPage(c, 404, 'Not found', 'There is no such member.');
    if (!mayHandle(c, member.role) || !mayHandle(c, role)) return forbidden(c, 'owners.manage');
    try {
      await changeRole(c.var.deps.sql, id, role);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'conflict') return showTeam(c, { error: err.message }, 409);
      throw err;
    }
    return afterChange(c, id);
  });

  app.post('/team/:memberId/remove', async (c) => {
    const id = urlId(c, 'memberId', 'member');
    const member = await getMember(c.var.deps.sql, id);
    if (!member) return errorPage(c, 404, 'Not found', 'There is no such member.');
    if (!mayHandle(c, member.role)) return forbidden(c, 'owners.manage');
    try {
      await removeMember(c.var.deps.sql, id);
    } catch (err) {
      if (err instanceof ServiceError && err.code === 'conflict') return showTeam(c, { error: err.message }, 409);
      throw err;
    }
    return afterChange(c, id);
  });
}
