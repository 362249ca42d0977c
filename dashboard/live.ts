import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import type { DashEnv } from './env.ts';

/** What a progress page's bar and counts show; `done` ends the stream (the page then reloads). */
export type Progress = { status: string; percent: number; counts: Record<string, number>; done: boolean };

const POLL_MS = 1_000;
/** A stream ends after this long; the browser reconnects (EventSource's retry) and reads on. */
const STREAM_MS = 5 * 60_000;

/**
 * Server-sent events for a progress page (an import, a broadcast): one `progress` event now,
 * then one each time `read` answers something different, read once a second, until it is done.
 * The row is the only source of truth, so a reconnect simply starts again from it.
 */
export function progressStream(c: Context<DashEnv>, read: () => Promise<Progress | undefined>) {
  c.header('X-Accel-Buffering', 'no');
  return streamSSE(c, async (stream) => {
    let ended = false;
    stream.onAbort(() => { ended = true; });
    const until = Date.now() + STREAM_MS;
    let last = '';
    try {
      await stream.write('retry: 2000\n\n');
      while (!ended && Date.now() < until) {
        const now = await read();
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
