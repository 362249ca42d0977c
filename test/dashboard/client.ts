import { createTestContext, type TestContext } from '../helpers/app.ts';
import { ownerSetupToken } from '../../dashboard/setup.ts';
import { newId } from '../../src/platform/ids.ts';
import { randomBase64url, sha256 } from '../../src/platform/crypto.ts';
import type { Role } from '../../src/members/roles.ts';

/** A cookie-keeping client over `app.request()`, reading CSRF tokens out of pages like a browser would. */
export function browser(ctx: TestContext, extraHeaders: Record<string, string> = {}) {
  const jar = new Map<string, string>();
  let csrf = '';
  const remember = (res: Response) => {
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const i = pair!.indexOf('=');
      const name = pair!.slice(0, i);
      const value = pair!.slice(i + 1);
      if (value === '' || /max-age=0/i.test(line)) jar.delete(name);
      else jar.set(name, value);
    }
  };
  const headers = () => ({ ...extraHeaders, cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') });
  // In production sign-up needs the setup link; the client follows it as the operator would.
  const withSetup = (path: string) => (path === '/dashboard/signup' && !ctx.config.development
    ? `${path}?token=${ownerSetupToken(ctx.config.secretKey)}` : path);
  return {
    jar,
    /** A form POST with repeated fields (checkboxes), answered without following redirects. */
    async postMany(path: string, fields: [string, string][]) {
      const form = new URLSearchParams([['_csrf', csrf], ...fields]);
      const res = await ctx.app.request(path, {
        method: 'POST',
        headers: { ...headers(), 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      });
      remember(res);
      return res;
    },
    get csrf() {
      return csrf;
    },
    async get(path: string) {
      const res = await ctx.app.request(withSetup(path), { headers: headers() });
      remember(res);
      const text = await res.text();
      const token = /name="_csrf" value="([^"]+)"/.exec(text);
      if (token) csrf = token[1]!;
      return { res, text };
    },
    /** A form POST; `_csrf` is the last page's token unless the fields say otherwise. */
    async post(path: string, fields: Record<string, string> = {}, init: { headers?: Record<string, string> } = {}) {
      const form = new URLSearchParams({ _csrf: csrf, ...fields });
      if (fields._csrf === undefined && !csrf) form.delete('_csrf');
      const res = await ctx.app.request(withSetup(path), {
        method: 'POST',
        headers: { ...headers(), 'content-type': 'application/x-www-form-urlencoded', ...init.headers },
        body: form.toString(),
      });
      remember(res);
      const text = await res.text();
      const token = /name="_csrf" value="([^"]+)"/.exec(text);
      if (token) csrf = token[1]!;
      return { res, text };
    },
  };
}

export type Browser = ReturnType<typeof browser>;

export const OWNER = { email: 'owner@example.com', password: 'correct horse battery' };

/** Signs up the owner (first run) or signs in, leaving the client with a session. */
export async function signIn(b: Browser, owner = OWNER, mode: 'signup' | 'login' = 'signup') {
  await b.get(`/dashboard/${mode}`);
  const { res } = await b.post(`/dashboard/${mode}`, owner);
  if (res.status !== 303) throw new Error(`${mode} answered ${res.status}`);
  await b.get('/dashboard');
}

/**
 * A signed-in owner and two projects, A and B, each with a key, and their dashboard paths: the
 * starting point of the page tests, where B checks that A's rows stay out of its reach.
 */
export async function signedInWithTwoProjects() {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  const b = browser(ctx);
  await signIn(b);
  const a = await ctx.tenant('project A');
  const other = await ctx.tenant('project B');
  return { ctx, b, a, other, P: `/dashboard/projects/${a.projectId}`, Q: `/dashboard/projects/${other.projectId}` };
}

/**
 * A member with `role` and a signed-in client for them. The session row is written directly, as
 * sign-in would write it, so a test needs no scrypt work per member.
 */
export async function memberSession(ctx: TestContext, role: Role, email = `${role}-${randomBase64url(6).toLowerCase()}@example.com`) {
  const id = newId('member');
  await ctx.sql`insert into members (id, email, role) values (${id}, ${email}, ${role})`;
  const token = randomBase64url(32);
  await ctx.sql`insert into dashboard_sessions (id, member_id, csrf_secret, expires_at)
    values (${sha256(token).toString('hex')}, ${id}, ${randomBase64url(32)}, now() + interval '1 day')`;
  const b = browser(ctx);
  b.jar.set('mailroom_session', token);
  await b.get('/dashboard');
  return { id, email, b };
}
