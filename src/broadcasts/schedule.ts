import { ValidationError } from '../http/errors.ts';
import { MAX_SCHEDULE_DAYS } from '../emails/validate.ts';
import { loadOnce } from '../platform/load-once.ts';

// English only, and loaded on first use: every locale is 266 modules on each process's start.
const loadChrono = loadOnce(() => import('chrono-node/en'));

const ISO = /^\d{4}-\d{2}-\d{2}T/;

/**
 * `scheduled_at` as ISO 8601 or natural language ("in 1 hour", "tomorrow at 9am", read in UTC by
 * chrono-node, the parser useSend uses). A time already past means now; more than 30 days ahead,
 * or nothing recognisable, is refused.
 */
export async function parseScheduledAt(input: string, now = new Date(), loc: (string | number)[] = ['body', 'scheduled_at']): Promise<Date> {
  const at = ISO.test(input.trim())
    ? new Date(input.trim())
    : (await loadChrono()).parseDate(input, { instant: now, timezone: 'UTC' }, { forwardDate: true });
  if (!at || Number.isNaN(at.getTime())) {
    throw new ValidationError([{ loc, msg: 'Not a time: use ISO 8601 or words such as "in 1 hour" or "tomorrow at 9am"', type: 'datetime_invalid', input }]);
  }
  if (at.getTime() > now.getTime() + MAX_SCHEDULE_DAYS * 86_400_000) {
    throw new ValidationError([{ loc, msg: `At most ${MAX_SCHEDULE_DAYS} days ahead`, type: 'datetime_too_far', input }]);
  }
  return at;
}
