import type { AppEnv } from '../src/http/context.ts';
import type { Project } from '../src/projects/service.ts';

/** A signed-in owner's session, as loaded from its cookie. */
export type Session = { id: string; ownerId: string; email: string; csrfSecret: string };


export type DashEnv = {
  Variables: AppEnv['Variables'] & {
    session?: Session;
    /** The token every form of this response carries. */
    csrf: string;
    project: Project;
  };
};

/** Where the sub-app is mounted; redirects and links are absolute. */
export const BASE = '/dashboard';
