import type { Sql } from './db.ts';

/**
 * Group commit: concurrent callers share one transaction. Every commit that enqueues a job ends
 * in a NOTIFY, and PostgreSQL serialises those commits, so one transaction per request caps the
 * rate however many connections there are. Here the items that arrive while a batch is being
 * written wait for it, then go together in the next one.
 *
 * A batch that fails is retried one item at a time, so one bad item never fails its neighbours.
 * A caller is answered only after its own item's transaction committed.
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
};

type Pending<T, R> = { item: T; resolve: (r: R) => void; reject: (e: unknown) => void };

export class GroupCommit<T, R> {
  private queue: Pending<T, R>[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly maxInFlight: number;
  private readonly minToOverlap: number;
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
  }

  run(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
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
    return this.inFlight === 0 || this.queue.length >= this.minToOverlap;
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
