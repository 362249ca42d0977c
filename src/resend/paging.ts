import type { Context } from 'hono';
import { ValidationError } from '../http/errors.ts';

/**
 * Resend's list paging, `?limit=&after=&before=` (limit 1 to 100, default 20; at most one
 * cursor), as every `/resend` list route reads it. The cursor's owner is the caller's to check.
 */
export function resendPageQuery(c: Context) {
  const limitRaw = c.req.query('limit');
  const limit = limitRaw === undefined ? 20 : Number(limitRaw);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new ValidationError([{ loc: ['query', 'limit'], msg: 'limit must be a whole number from 1 to 100', type: 'value_error' }]);
  const after = c.req.query('after');
  const before = c.req.query('before');
  if (after !== undefined && before !== undefined) throw new ValidationError([{ loc: ['query', 'after'], msg: 'give after or before, not both', type: 'value_error' }]);
  return { limit, after, before, cursor: after ?? before };
}
