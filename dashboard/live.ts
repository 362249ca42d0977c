import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { DashEnv } from './env.ts';

/** What a progress page's bar and counts show; `done` ends the stream (the page then reloads). */
export type Progress = { status: string; percent: number; counts: Record<string, number>; done: boolean };

const POLL_MS = 1_000;
/** A stream ends after this long; the browser reconnects (EventSource's retry) and reads on. */
const STREAM_MS = 5 * 60_000;

type SharedRead = { at: number; settled: boolean; value: Promise<Progress | undefined> };
/** The last read of each progress followed in this process, by project and item. */
const latest = new Map<string, SharedRead>();
let reads = 0;

/**
 * One reader per item per process: every stream following `key` shares a read made less than
 * POLL_MS ago, or one still under way, so ten viewers of a sending broadcast cost what one does.
 * An entry is forgotten once stale, so an item nobody follows holds nothing.
 */
function readShared(key: string, read: () => Promise<Progress | undefined>): Promise<Progress | undefined> {
  const now = Date.now();
  const hit = latest.get(key);
  if (hit && (!hit.settled || now - hit.at < POLL_MS)) return hit.value;
  reads++;
  const entry: SharedRead = { at: now, settled: false, value: read() };
  latest.set(key, entry);
  const forget = () => {
    entry.settled = true;
    setTimeout(() => { if (latest.get(key) === entry) latest.delete(key); }, POLL_MS).unref();
  };
  entry.value.then(forget, forget);
  return entry.value;
}

/** How many progress reads this process has made (each shared by every stream following the item). */
export const progressReads = () => reads;

/**
 * Server-sent events for a progress page (an import, a broadcast): one `progress` event now,
 * then one each time `read` answers something different, read once a second, until it is done.
 * The row is the only source of truth, so a reconnect simply starts again from it. `key` names
 * the item within the page's project (the project is added here): streams of one item share
 * each read (readShared).
 */
export function progressStream(c: Context<DashEnv>, key: string, read: () => Promise<Progress | undefined>) {
  const shared = `${c.var.project.id}:${key}`;
  c.header('X-Accel-Buffering', 'no');
  return streamSSE(c, async (stream) => {
    let ended = false;
    stream.onAbort(() => { ended = true; });
    const until = Date.now() + STREAM_MS;
    let last = '';
    try {
      await stream.write('retry: 2000\n\n');
      while (!ended && Date.now() < until) {
        const now = await readShared(shared, read);
        if (!now) break;
        const data = JSON.stringify(now);
        if (data !== last) {
          await stream.writeSSE({ event: 'progress', data });
          last = data;
        }
        if (now.done) break;
        await stream.sleep(POLL_MS);
      }
    } catch (err) {
      c.var.deps.log.warn({ err }, 'progress stream ended');
    }
  });
}
