import type { Sql } from './db.ts';

/**
 * Group commit: concurrent callers share one transaction. Every commit that enqueues a job ends
 * in a NOTIFY, and PostgreSQL serialises those commits, so one transaction per request caps the
 * rate however many connections there are. Here the items that arrive while a batch is being
 * written wait for it, then go together in the next one.
 *
 * A batch that fails is retried one item at a time, so one bad item never fails its neighbours.
 * A caller is answered only after its own item's transaction committed.
 *
 * A caller that knows an item is on its way (an SMTP message whose content is arriving) can
 * announce it; a batch about to start then waits for the announced items, up to
 * `maxArrivalWaitMs`, so that they share its transaction instead of paying for one of their own
 * (PostgreSQL's commit_delay, for the callers that can say when waiting is worth it).
 */
export type GroupCommitOptions = {
  /** Items written by one transaction at most. */
  maxBatch?: number;
  /** Batches being written at once; more overlap the round trips of one with the next. */
  maxInFlight?: number;
  /**
   * Items that must be waiting before a batch starts beside one already in flight (default 1).
   * A transaction has a fixed cost whatever its size: below this many, they wait for the batch in
   * flight and go together after it.
   */
  minToOverlap?: number;
  /**
   * How long a batch may wait for announced items (ms; default 0: announcements are ignored),
   * counted from when its oldest item arrived.
   */
  maxArrivalWaitMs?: number;
};

/** An item announced as on its way to `run`; `arrived` (called by `run`, or on giving up) withdraws it. */
export type Arrival = { arrived(): void };

type Pending<T, R> = { item: T; at: number; resolve: (r: R) => void; reject: (e: unknown) => void };

export class GroupCommit<T, R> {
  private queue: Pending<T, R>[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  private readonly minToOverlap: number;
  private readonly maxArrivalWaitMs: number;
  /** Items announced and not yet arrived. */
  private announced = 0;
  private waitTimer: NodeJS.Timeout | undefined;
  /** Sizes of the last batches written, for the benchmarks. */
  readonly recentSizes: number[] = [];
  /** Batches written since the start, the fallbacks not counted. */
  batchesWritten = 0;

  /**
   * @param write writes the items in one transaction and returns one result per item, in order.
   * @param writeOne writes a single item after its batch failed; defaults to `write([item])`.
   */
  constructor(
    private readonly write: (items: T[]) => Promise<R[]>,
    options: GroupCommitOptions = {},
    private readonly writeOne: (item: T) => Promise<R> = async (item) => (await write([item]))[0]!,
  ) {
    this.maxBatch = options.maxBatch ?? 128;
    this.maxInFlight = options.maxInFlight ?? 2;
    this.minToOverlap = options.minToOverlap ?? 1;
    this.maxArrivalWaitMs = options.maxArrivalWaitMs ?? 0;
  }

  /** Announces an item that will reach `run` soon, unless the caller gives up on it first. */
  announce(): Arrival {
    if (this.maxArrivalWaitMs <= 0) return { arrived() {} };
    this.announced++;
    let pending = true;
    return {
      arrived: () => {
        if (!pending) return;
        pending = false;
        this.announced--;
        this.schedule();
      },
    };
  }

  run(item: T, arrival?: Arrival): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, at: performance.now(), resolve, reject });
      arrival?.arrived();
      this.schedule();
    });
  }

  /** Flushes on the next turn of the event loop, so requests parsed in the same turn share it. */
  private schedule() {
    if (this.scheduled || !this.mayStartBatch()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.mayStartBatch()) void this.flush(this.queue.splice(0, this.maxBatch));
    });
  }

  private mayStartBatch() {
    if (this.queue.length === 0 || this.inFlight >= this.maxInFlight) return false;
    if (this.inFlight > 0 && this.queue.length < this.minToOverlap) return false;
    return !this.waitingForArrivals();
  }

  /** Whether announced items could still join the next batch, within its oldest item's wait. */
  private waitingForArrivals(): boolean {
    if (this.announced === 0 || this.queue.length + this.announced > this.maxBatch) return false;
    const left = this.queue[0]!.at + this.maxArrivalWaitMs - performance.now();
    if (left <= 0) return false;
    this.waitTimer ??= setTimeout(() => {
      this.waitTimer = undefined;
      this.schedule();
    }, left);
    return true;
  }

  private async flush(batch: Pending<T, R>[]) {
    this.inFlight++;
    try {
      this.batchesWritten++;
      this.recentSizes.push(batch.length);
      if (this.recentSizes.length > 1000) this.recentSizes.splice(0, 500);
      let results: R[] | undefined;
      try {
        results = await this.write(batch.map((p) => p.item));
      } catch (err) {
        if (batch.length === 1) batch[0]!.reject(err);
      }
      if (results) {
        batch.forEach((p, i) => p.resolve(results[i]!));
      } else if (batch.length > 1) {
        await Promise.all(batch.map((p) => this.writeOne(p.item).then(p.resolve, p.reject)));
      }
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}

/**
 * One GroupCommit per database pool, made on first use: only callers on the same pool can share a
 * transaction or a query, and a second pool (a test's own) never mixes its batches with the first.
 */
export function groupCommitPerPool<T, R>(make: (sql: Sql) => GroupCommit<T, R>): (sql: Sql) => GroupCommit<T, R> {
  const byPool = new WeakMap<Sql, GroupCommit<T, R>>();
  return (sql) => {
    let committer = byPool.get(sql);
    if (!committer) {
      committer = make(sql);
      byPool.set(sql, committer);
    }
    return committer;
  };
}
