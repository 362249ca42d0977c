import type { AppEnv } from '../src/http/context.ts';
import type { Project } from '../src/projects/service.ts';
import type { Session } from './session.ts';

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
