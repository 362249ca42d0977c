import type { Sql } from '../platform/db.ts';
import { SINK_CHANNEL } from './store.ts';

type Subscriber = { onArrival: () => void; end: () => void };

/** Open live inboxes in this process; more are refused, and those pages simply don't update. */
export const MAX_LIVE_INBOXES = 100;

/**
 * Tells live inboxes that mail reached their project's sink. One LISTEN per process serves every
 * open inbox, fanned out by project in memory, so a hundred watchers cost one connection. The
 * notification carries only the project id: each watcher reads what it has not shown yet.
 */
export class SinkFeed {
  readonly #sql: Sql;
  readonly #byProject = new Map<string, Set<Subscriber>>();
  #size = 0;
  #listening?: Promise<{ unlisten(): Promise<void> }>;

  constructor(sql: Sql) {
    this.#sql = sql;
  }

  get size() {
    return this.#size;
  }

  /**
   * Calls `onArrival` after each catch for the project until the returned function is called,
   * or `end` when the feed closes. Resolves once the LISTEN is in place, so nothing caught after
   * that is missed. Undefined when the process already serves its maximum.
   */
  async subscribe(projectId: string, onArrival: () => void, end: () => void): Promise<(() => void) | undefined> {
    if (this.#size >= MAX_LIVE_INBOXES) return undefined;
    const subscriber = { onArrival, end };
    let set = this.#byProject.get(projectId);
    if (!set) this.#byProject.set(projectId, (set = new Set()));
    set.add(subscriber);
    this.#size++;
    this.#listening ??= this.#sql.listen(SINK_CHANNEL, (projectIdPayload) => this.#notify(projectIdPayload));
    try {
      await this.#listening;
    } catch (err) {
      // The next subscriber tries again rather than inheriting a failed LISTEN.
      this.#listening = undefined;
      this.#remove(projectId, subscriber);
      throw err;
    }
    return () => this.#remove(projectId, subscriber);
  }

  #notify(projectId: string) {
    for (const s of this.#byProject.get(projectId) ?? []) s.onArrival();
  }

  #remove(projectId: string, subscriber: Subscriber) {
    const set = this.#byProject.get(projectId);
    if (!set?.delete(subscriber)) return;
    this.#size--;
    if (set.size === 0) this.#byProject.delete(projectId);
  }

  /** Ends every open stream (so an HTTP server can close) and stops listening. */
  async close() {
    for (const set of this.#byProject.values()) for (const s of set) s.end();
    this.#byProject.clear();
    this.#size = 0;
    const listening = this.#listening;
    this.#listening = undefined;
    await (await listening?.catch(() => undefined))?.unlisten().catch(() => {});
  }
}

const feeds = new Map<Sql, SinkFeed>();

/** The process's feed over this pool, made on first use. */
export function sinkFeedFor(sql: Sql): SinkFeed {
  let feed = feeds.get(sql);
  if (!feed) feeds.set(sql, (feed = new SinkFeed(sql)));
  return feed;
}

/** Closes every feed: run before the HTTP server closes, or open inboxes would hold it open. */
export async function closeSinkFeeds() {
  const open = [...feeds.values()];
  feeds.clear();
  await Promise.all(open.map((feed) => feed.close()));
}
