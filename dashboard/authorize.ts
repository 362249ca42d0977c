import type { MiddlewareHandler } from 'hono';
import { withArticle } from '../src/members/roles.ts';
import type { DashEnv } from './env.ts';
import { actionOf, allowsRequest, rolesNeeded, type Action } from './permissions.ts';
import { errorPage } from './render.tsx';

/** The refusal: 403, saying which role the request needed. */
export function forbidden(c: Parameters<MiddlewareHandler<DashEnv>>[0], action: Action | undefined) {
  const role = c.var.member!.role;
  return errorPage(c, 403, 'Not allowed',
    `This needs ${rolesNeeded(action)}. You are signed in as ${withArticle(role)}; ask an owner or admin of this Mailroom if you need more.`);
}

/**
 * The one check of every signed-in dashboard request, against the table in permissions.ts. It
 * runs before any route reads a body or a row, so a refused form stores nothing.
 */
export const authorize: MiddlewareHandler<DashEnv> = async (c, next) => {
  const { role } = c.var.member!;
  if (!allowsRequest(role, c.req.method, c.req.path)) return forbidden(c, actionOf(c.req.method, c.req.path));
  await next();
};
