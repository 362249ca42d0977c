import { createContext } from 'hono/jsx';
import type { Role } from '../src/members/roles.ts';

/**
 * The signed-in member's role while a page renders (undefined before sign-in). Form reads it and
 * renders nothing the table would refuse, so a viewer's pages carry no form but sign-out.
 */
export const Access = createContext<Role | undefined>(undefined);
