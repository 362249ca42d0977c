import type { Context } from 'hono';
import { isWellFormedId, type ID_PREFIX } from '../src/platform/ids.ts';
import { ServiceError } from '../src/platform/errors.ts';

/** An id from the URL; one that cannot name anything is the dashboard's 404, before any query. */
export function urlId(c: Context, name: string, kind: keyof typeof ID_PREFIX): string {
  const value = c.req.param(name) ?? '';
  if (!isWellFormedId(kind, value)) throw new ServiceError('not_found', 'There is no such page.');
  return value;
}
