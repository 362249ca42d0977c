import type { Context, Hono } from 'hono';
import { acceptInvitation, findInvitation } from '../../src/members/invitations.ts';
import { ServiceError } from '../../src/platform/errors.ts';
import { BASE, type DashEnv } from '../env.ts';
import { JoinPage } from '../pages/join.tsx';
import { errorPage, field, render } from '../render.tsx';
import { startSession } from '../session.ts';
import { auditIp } from '../../src/http/auth.ts';
import { attemptSource, clientIp } from '../../src/http/client-ip.ts';
import { PasswordWorkBusy } from '../password.ts';

/**
 * Attempts per minute to join from one client address (IPv6: its /64), counted before the token
 * is looked up or a password hashed. A real invitee needs one or two.
 */
export const JOIN_ATTEMPTS_PER_MINUTE = 10;

/** Following an invitation link: no session needed, the token is the credential. */

const tooMany = (c: Context<DashEnv>, retryAfter: number, why = 'Too many attempts to join from your address. Wait a minute and try again.') => {
  c.header('Retry-After', String(retryAfter));
  return errorPage(c, 429, 'Too many attempts', why);
};

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
    const { sql, limiter, config } = c.var.deps;
    const address = clientIp(c, config.trustProxy);
    const attempt = await limiter.hit(`dashboard-join:ip:${attemptSource(address)}`, JOIN_ATTEMPTS_PER_MINUTE);
    if (!attempt.allowed) return tooMany(c, attempt.resetSeconds);
    const password = field(await c.req.parseBody(), 'password');
    try {
      const { member } = await acceptInvitation(sql, token, password, auditIp(address));
      await startSession(c, member.id, 'invitation');
      return c.redirect(BASE, 303);
    } catch (err) {
      if (err instanceof PasswordWorkBusy) return tooMany(c, 1, err.message);
      if (!(err instanceof ServiceError)) throw err;
      if (err.code !== 'invalid_input') return err.code === 'conflict' ? errorPage(c, 409, 'Already a member', err.message) : used(c);
      const invitation = await findInvitation(sql, token);
      if (!invitation) return used(c);
      return render(c, <JoinPage csrf={c.var.csrf} token={token} email={invitation.email} role={invitation.role} error={err.message} />, 422);
    }
  });
}
