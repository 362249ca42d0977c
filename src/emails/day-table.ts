import { decodeTime } from 'ulid';
import type { Sql } from '../platform/db.ts';
import { isWellFormedId } from '../platform/ids.ts';

/**
 * The worker's statements on one email name its day's partition of `emails` (`emails_pYYYYMMDD`)
 * instead of the parent. Through the parent, PostgreSQL plans the statement over every day kept
 * before it prunes to one: at 98 days that was half the database's time per email sent. A
 * partition is used only once the catalog shows it holds exactly its UTC day of ids (a partition
 * made by an upgrade, or one of a day not yet seen, is not): otherwise the parent, which is always
 * right.
 */
export type EmailsTable = 'emails' | `emails_p${string}`;

type Known = { days: Set<string>; readAt: number; reading?: Promise<void> };
const knownByPool = new WeakMap<Sql, Known>();

/** A day not among the known partitions is looked for again at most this often. */
const REREAD_MS = 5_000;

const dayName = (id: string) => `emails_p${new Date(decodeTime(id.slice('email_'.length))).toISOString().slice(0, 10).replaceAll('-', '')}` as const;

/** The partition that holds `emailId`, or the parent when it cannot be named for sure. */
async function emailsTableFor(sql: Sql, emailId: string): Promise<EmailsTable> {
  if (!isWellFormedId('email', emailId)) return 'emails';
  const name = dayName(emailId);
  let known = knownByPool.get(sql);
  if (!known) knownByPool.set(sql, known = { days: new Set(), readAt: -Infinity });
  if (!known.days.has(name) && performance.now() - known.readAt > REREAD_MS) await reread(sql, known);
  return known.days.has(name) ? name : 'emails';
}

/**
 * Runs a statement on the email's day partition. A partition removed since the catalog was read
 * (its day's retention) fails the statement: it runs again on the parent, and the catalog is read
 * again before the next partition is named.
 */
export async function inEmailsDay<T>(sql: Sql, emailId: string, run: (table: EmailsTable) => Promise<T>): Promise<T> {
  const table = await emailsTableFor(sql, emailId);
  try {
    return await run(table);
  } catch (err) {
    if (table === 'emails' || (err as { code?: string }).code !== '42P01') throw err;
    knownByPool.delete(sql);
    return run('emails');
  }
}

function reread(sql: Sql, known: Known): Promise<void> {
  known.reading ??= (async () => {
    try {
      // A day partition is named only when its bounds are exactly its day's first ids.
      const rows = await sql<{ name: string }[]>`
        select c.relname as name
        from pg_inherits i join pg_class c on c.oid = i.inhrelid
        cross join lateral (select to_date(substr(c.relname, 9), 'YYYYMMDD')::timestamp at time zone 'UTC' as day) d
        where i.inhparent = 'emails'::regclass and c.relname ~ '^emails_p[0-9]{8}$'
          and pg_get_expr(c.relpartbound, c.oid) = format('FOR VALUES FROM (%L) TO (%L)',
            mailroom_id_floor('email_', d.day), mailroom_id_floor('email_', d.day + interval '1 day'))`;
      known.days = new Set(rows.map((r) => r.name));
    } catch {
      // The statement that wanted the partition goes to the parent, and meets the trouble there.
    } finally {
      known.readAt = performance.now();
      known.reading = undefined;
    }
  })();
  return known.reading;
}
