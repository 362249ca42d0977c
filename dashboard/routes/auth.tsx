import type { Hono } from 'hono';
import { clientIp } from '../../src/http/client-ip.ts';
import { BASE, type DashEnv } from '../env.ts';
import { errorPage, field, render } from '../render.tsx';
import { authenticateOwner, normaliseEmail, ownerExists, registerOwner, SignupError } from '../owner.ts';
import { LoginPage, SignupPage } from '../pages/auth.tsx';
import { endSession, startSession } from '../session.ts';

/** Attempts per minute, per client address and per email, before sign-in answers 429. */
export const LOGIN_ATTEMPTS_PER_MINUTE = 10;

export function registerAuthRoutes(app: Hono<DashEnv>) {
  app.get('/signup', async (c) => {
    if (await ownerExists(c.var.deps.sql)) return c.redirect(`${BASE}/login`, 303);
    return render(c, <SignupPage csrf={c.var.csrf} />);
  });

  app.post('/signup', async (c) => {
    const body = await c.req.parseBody();
    const email = field(body, 'email');
    try {
      const owner = await registerOwner(c.var.deps.sql, email, field(body, 'password'));
      await startSession(c, owner.id);
      return c.redirect(BASE, 303);
    } catch (err) {
      if (!(err instanceof SignupError)) throw err;
      const taken = await ownerExists(c.var.deps.sql);
      return render(c, <SignupPage csrf={c.var.csrf} email={email} error={err.message} />, taken ? 409 : 422);
    }
  });

  app.get('/login', async (c) => {
    if (!(await ownerExists(c.var.deps.sql))) return c.redirect(`${BASE}/signup`, 303);
    if (c.var.session) return c.redirect(BASE, 303);
    return render(c, <LoginPage csrf={c.var.csrf} />);
  });

  app.post('/login', async (c) => {
    const { sql, limiter, config } = c.var.deps;
    const body = await c.req.parseBody();
    const email = field(body, 'email');
    // Counted before the password is checked, so guessing also costs the guesser the scrypt work.
    const byIp = await limiter.hit(`dashboard-login:ip:${clientIp(c, config.trustProxy)}`, LOGIN_ATTEMPTS_PER_MINUTE);
    const byEmail = await limiter.hit(`dashboard-login:email:${normaliseEmail(email)}`, LOGIN_ATTEMPTS_PER_MINUTE);
    if (!byIp.allowed || !byEmail.allowed) {
      c.header('Retry-After', String(Math.max(byIp.allowed ? 0 : byIp.resetSeconds, byEmail.allowed ? 0 : byEmail.resetSeconds)));
      return errorPage(c, 429, 'Too many attempts', 'Too many sign-in attempts. Wait a minute and try again.');
    }
    const owner = await authenticateOwner(sql, email, field(body, 'password'));
    if (!owner) return render(c, <LoginPage csrf={c.var.csrf} email={email} error="Wrong email or password." />, 401);
    await startSession(c, owner.id);
    return c.redirect(BASE, 303);
  });

  app.post('/logout', async (c) => {
    if (c.var.session) await endSession(c, c.var.session);
    return c.redirect(`${BASE}/login`, 303);
  });
}
