import type { Context, Hono } from 'hono';
import { acceptInvitation, findInvitation } from '../../src/members/invitations.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { BASE, type DashEnv } from '../env.ts';
import { JoinPage } from '../pages/join.tsx';
import { errorPage, field, render } from '../render.tsx';
import { startSession } from '../session.ts';
import { auditIp } from '../../src/http/auth.ts';
import { clientIp } from '../../src/http/client-ip.ts';

/** Following an invitation link: no session needed, the token is the credential. */

const used = (c: Context<DashEnv>) =>
  errorPage(c, 410, 'Invitation not valid', 'This invitation link was used already, has expired, or was withdrawn. Ask for a new one.');

export function registerInvitationRoutes(app: Hono<DashEnv>) {
  app.get('/join/:token', async (c) => {
    const token = c.req.param('token');
    const invitation = await findInvitation(c.var.deps.sql, token);
    if (!invitation) return used(c);
    return render(c, <JoinPage csrf={c.var.csrf} token={token} email={invitation.email} role={invitation.role} />);
  });

  app.post('/join/:token', async (c) => {
    const token = c.req.param('token');
    const password = field(await c.req.parseBody(), 'password');
    try {
      const ip = auditIp(clientIp(c, c.var.deps.config.trustProxy));
      const { member } = await acceptInvitation(c.var.deps.sql, token, password, ip);
      await startSession(c, member.id, 'invitation');
      return c.redirect(BASE, 303);
    } catch (err) {
      if (!(err instanceof ServiceError)) throw err;
      if (err.code !== 'invalid_input') return err.code === 'conflict' ? errorPage(c, 409, 'Already a member', err.message) : used(c);
      const invitation = await findInvitation(c.var.deps.sql, token);
      if (!invitation) return used(c);
      return render(c, <JoinPage csrf={c.var.csrf} token={token} email={invitation.email} role={invitation.role} error={err.message} />, 422);
    }
  });
}
