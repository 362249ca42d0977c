import type { AppEnv } from '../src/http/context.ts';
import type { Project } from '../src/projects/service.ts';
import type { Role } from '../src/members/roles.ts';

/** Who is signed in: the actor of every dashboard change (the audit log's `member`). */
export type Member = { id: string; email: string; role: Role };

/** A signed-in member's session, as loaded from its cookie with the member's current role. */
export type Session = { id: string; memberId: string; email: string; role: Role; csrfSecret: string };

export type DashEnv = {
  Variables: AppEnv['Variables'] & {
    session?: Session;
    /** Set on every signed-in request, before any route runs. */
    member?: Member;
    /** The token every form of this response carries. */
    csrf: string;
    project: Project;
  };
};

/** Where the sub-app is mounted; redirects and links are absolute. */
export const BASE = '/dashboard';
