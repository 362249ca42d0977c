import type { Context } from 'hono';
import type { Child } from 'hono/jsx';
import type { DashEnv } from './env.ts';
import { ErrorPage } from './pages/auth.tsx';
import { Access } from './access.ts';

/** Every page renders inside the member's role, which its forms read (layout.tsx). */
function withAccess(c: Context<DashEnv>, page: Child) {
  return <Access.Provider value={c.var.member?.role}>{page}</Access.Provider>;
}

export function errorPage(c: Context<DashEnv>, status: 400 | 401 | 403 | 404 | 409 | 410 | 413 | 422 | 429, title: string, message: string) {
  return c.html(withAccess(c, <ErrorPage csrf={c.var.csrf ?? ''} email={c.var.session?.email} title={title} message={message} />) as string, status);
}

export function render(c: Context<DashEnv>, page: Child, status: 200 | 401 | 409 | 422 = 200) {
  return c.html(withAccess(c, page) as string, status);
}

/** A string field of a parsed form; anything else (absent, a file) reads as empty. */
export function field(body: Record<string, unknown>, name: string): string {
  const value = body[name];
  return typeof value === 'string' ? value : '';
}

/** What every signed-in page needs. */
export function base(c: Context<DashEnv>) {
  return { csrf: c.var.csrf, email: c.var.member!.email, project: c.var.project };
}
