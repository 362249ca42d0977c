import type { Sql } from './db.ts';
import type { Logger } from './log.ts';
import { setIdClockOffset } from './ids.ts';

/** How often the database's clock is measured again, so a host clock stepped later is caught too. */
const MEASURE_EVERY_MS = 60_000;
/**
 * An offset under this is taken as none: a measurement is only as good as half its round trip,
 * and ids from processes whose clocks agree to within a second need no correcting.
 */
const IGNORE_UNDER_MS = 1_000;
/** How long boot waits for the first measurement. */
const FIRST_READING_WAIT_MS = 2_000;

/** The database's clock minus this host's, measured at the middle of one round trip. */
export async function measureClockOffset(sql: Sql): Promise<number> {
  const before = Date.now();
  const [row] = await sql<[{ ms: number }]>`select (extract(epoch from clock_timestamp()) * 1000)::float8 as ms`;
  const after = Date.now();
  return row.ms - (before + after) / 2;
}

/**
 * Makes ids from the database's clock (ids.ts): measures it now and every minute after. A host
 * whose clock is wrong by days then files its mail under the database's today instead of a day
 * with no partition (§22.12). A failed measurement keeps the last one. Answers the stop.
 */
export async function startIdClock(sql: Sql, log: Logger): Promise<() => void> {
  let logged = 0;
  const measure = async () => {
    try {
      const offset = await measureClockOffset(sql);
      const applied = Math.abs(offset) < IGNORE_UNDER_MS ? 0 : Math.round(offset);
      setIdClockOffset(applied);
      if (applied !== 0 && Math.abs(applied - logged) >= IGNORE_UNDER_MS) {
        log.warn({ offset_ms: applied }, "this host's clock differs from the database's: ids and days follow the database's");
      }
      logged = applied;
    } catch (err) {
      log.debug({ err: (err as Error).message }, 'could not read the database clock; ids keep the last offset');
    }
  };
  // Boot waits for the first reading, but not for a database that is away: a later one comes.
  await Promise.race([measure(), new Promise((resolve) => setTimeout(resolve, FIRST_READING_WAIT_MS).unref())]);
  const timer = setInterval(() => void measure(), MEASURE_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}
