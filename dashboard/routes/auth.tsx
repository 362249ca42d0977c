import type { Context, Hono } from 'hono';
import { attemptSource, clientIp } from '../../src/http/client-ip.ts';
import { BASE, type DashEnv } from '../env.ts';
import { errorPage, field, render } from '../render.tsx';
import { authenticateMember, MAX_EMAIL_LENGTH, normaliseEmail, ownerExists, registerOwner, SignupError } from '../owner.ts';
import { setupAllowed } from '../setup.ts';
import { LoginPage, SignupPage } from '../pages/auth.tsx';
import { endSession, startSession } from '../session.ts';
import { PasswordWorkBusy } from '../password.ts';

/** The process has more password checks waiting than it queues (dashboard/password.ts). */
function busy(c: Context<DashEnv>, err: PasswordWorkBusy) {
  c.header('Retry-After', '1');
  return errorPage(c, 429, 'Busy', err.message);
}

/** Attempts per minute from one client address, whatever the email, before sign-in answers 429. */
export const LOGIN_ATTEMPTS_PER_MINUTE = 10;
/**
 * Attempts per minute for one email from one client address. Never per email alone: a flood of
 * wrong passwords for the owner's email from elsewhere would then lock the owner out everywhere.
 */
export const LOGIN_ATTEMPTS_PER_ADDRESS_AND_EMAIL = 5;

/** Sign-up in production before an owner exists, without the setup link. */
function setupRequired(c: Context<DashEnv>) {
  return errorPage(c, 403, 'Setup link required',
    'This instance has no owner yet. Open the setup link from the API\'s start-up log ("owner setup"), or create the owner with `npm run --silent cli -- owner create --email EMAIL`.');
}

/** The sign-in page offers the configured issuer. */
const ssoHost = (c: Context<DashEnv>) => c.var.deps.config.oidc?.issuer;

export function registerAuthRoutes(app: Hono<DashEnv>) {
  app.get('/signup', async (c) => {
    if (await ownerExists(c.var.deps.sql)) return c.redirect(`${BASE}/login`, 303);
    const token = c.req.query('token');
    if (!setupAllowed(c.var.deps.config, token)) return setupRequired(c);
    return render(c, <SignupPage csrf={c.var.csrf} setupToken={c.var.deps.config.development ? undefined : token} />);
  });

  app.post('/signup', async (c) => {
    const body = await c.req.parseBody();
    const token = field(body, 'token') || c.req.query('token');
    const { config, sql } = c.var.deps;
    // An instance with an owner answers as before (409); one without needs the setup link.
    if (!(await ownerExists(sql)) && !setupAllowed(config, token)) return setupRequired(c);
    const email = field(body, 'email');
    const setupToken = config.development ? undefined : token;
    try {
      const owner = await registerOwner(sql, email, field(body, 'password'));
      await startSession(c, owner.id, 'local');
      return c.redirect(BASE, 303);
    } catch (err) {
      if (err instanceof PasswordWorkBusy) return busy(c, err);
      if (!(err instanceof SignupError)) throw err;
      const taken = await ownerExists(sql);
      return render(c, <SignupPage csrf={c.var.csrf} email={email.slice(0, MAX_EMAIL_LENGTH)} error={err.message} setupToken={setupToken} />, taken ? 409 : 422);
    }
  });

  app.get('/login', async (c) => {
    if (!(await ownerExists(c.var.deps.sql))) return c.redirect(`${BASE}/signup`, 303);
    if (c.var.session) return c.redirect(BASE, 303);
    return render(c, <LoginPage csrf={c.var.csrf} sso={ssoHost(c)} />);
  });

  app.post('/login', async (c) => {
    const { sql, limiter, config } = c.var.deps;
    const body = await c.req.parseBody();
    const email = field(body, 'email');
    if (email.length > MAX_EMAIL_LENGTH) {
      return render(c, <LoginPage csrf={c.var.csrf} sso={ssoHost(c)} error={`Enter an email address of at most ${MAX_EMAIL_LENGTH} characters.`} />, 422);
    }
    // Counted before the password is checked, so guessing also costs the guesser the scrypt work.
    // Per address, and per address and email: never per email alone (see above).
    // IPv6 per /64 (attemptSource): one host usually holds a whole /64.
    const ip = attemptSource(clientIp(c, config.trustProxy));
    const byIp = await limiter.hit(`dashboard-login:ip:${ip}`, LOGIN_ATTEMPTS_PER_MINUTE);
    const byPair = byIp.allowed
      ? await limiter.hit(`dashboard-login:pair:${ip}:${normaliseEmail(email)}`, LOGIN_ATTEMPTS_PER_ADDRESS_AND_EMAIL)
      : byIp;
    if (!byIp.allowed || !byPair.allowed) {
      c.header('Retry-After', String(Math.max(byIp.allowed ? 0 : byIp.resetSeconds, byPair.allowed ? 0 : byPair.resetSeconds)));
      return errorPage(c, 429, 'Too many attempts', 'Too many sign-in attempts. Wait a minute and try again.');
    }
    let member;
    try {
      member = await authenticateMember(sql, email, field(body, 'password'));
    } catch (err) {
      if (err instanceof PasswordWorkBusy) return busy(c, err);
      throw err;
    }
    if (!member) return render(c, <LoginPage csrf={c.var.csrf} sso={ssoHost(c)} email={email} error="Wrong email or password." />, 401);
    await startSession(c, member.id, 'local');
    return c.redirect(BASE, 303);
  });

  app.post('/logout', async (c) => {
    if (c.var.session) await endSession(c, c.var.session);
    return c.redirect(`${BASE}/login`, 303);
  });
}
