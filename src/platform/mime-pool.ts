import { Readable } from 'node:stream';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import type { Piscina } from 'piscina';
import { loadOnce } from './load-once.ts';
import type { ParsedSinkMessage, PortMessage, ReceivedReading, StreamTask, WholeTask } from './mime-worker.ts';

export type { ParsedSinkMessage, ReceivedReading } from './mime-worker.ts';

/**
 * The one door for bytes someone else wrote (§22.1): every parse or decode of untrusted MIME runs
 * in a pool of worker threads (piscina), never on an event loop that answers /healthz, keeps
 * leases or serves other projects. Each message has a time budget, counted like PostgreSQL's
 * statement_timeout from when its thread starts on it (time spent waiting for the message's next
 * bytes, or for a download's reader, does not count); past it the task is aborted and its thread
 * replaced. Each thread's heap is capped; a message that needs more is refused and only its
 * thread dies. Either way the caller gets one MimeBudgetExceeded naming the budget.
 * The pool starts on first use, or at a worker's boot (startMimePool); one thread then stays, the
 * others end when idle, and the pool is closed on shutdown.
 */

export type MimeBudget = {
  /** Thread time one message may take. */
  timeMs: number;
  /** Each thread's V8 old-generation heap. */
  heapMb: number;
  /** Threads at most; more messages wait their turn (their budget has not started). */
  threads: number;
};

const DEFAULT_BUDGET: MimeBudget = { timeMs: 15_000, heapMb: 256, threads: 2 };
/** An idle thread past the first ends after this; the next message starts one again. */
const IDLE_MS = 30_000;
/** How much lower than the process's the threads' scheduling priority is (Linux: per thread). */
const NICE_INCREMENT = 10;
/** The most of a message handed to the thread at once, so a message held whole is not copied whole. */
const CHUNK_BYTES = 1024 * 1024;

let budget: MimeBudget = { ...DEFAULT_BUDGET };
let pool: Promise<Piscina> | undefined;

/** A message over one of its budgets: its parse was stopped, and it must not be tried again as it is. */
export class MimeBudgetExceeded extends Error {
  constructor(readonly budget: 'time' | 'heap', readonly limit: number) {
    super(budget === 'time'
      ? `the message took more than its parse time budget (${limit / 1000} s)`
      : `the message needed more than its parse memory budget (${limit} MB)`);
    this.name = 'MimeBudgetExceeded';
  }
}

/** The parser refused the message (malformed past what it reads): trying again would fail the same way. */
export class MimeUnreadable extends Error {
  constructor(message: string) {
    super(`the message could not be parsed: ${message}`);
    this.name = 'MimeUnreadable';
  }
}

/** Either refusal: the message, not the moment, is at fault. */
export const isMimeRefusal = (err: unknown): err is MimeBudgetExceeded | MimeUnreadable =>
  err instanceof MimeBudgetExceeded || err instanceof MimeUnreadable;

const ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('../mime-thread.ts', import.meta.url)
  // The production bundle puts the thread's entry beside the chunk this code is in.
  : new URL('./mime-thread.js', import.meta.url);

const loadPiscina = loadOnce(() => import('piscina'));

function thePool(): Promise<Piscina> {
  return (pool ??= loadPiscina().then(({ Piscina }) => new Piscina({
    filename: ENTRY.href,
    // One thread stays, so a message after a quiet spell does not wait for a thread to load the
    // parsers (a third of a second idle, over a second on a busy host).
    minThreads: 1,
    maxThreads: budget.threads,
    idleTimeout: IDLE_MS,
    concurrentTasksPerWorker: 1,
    // Below the event loop's priority: on a busy host a parse waits for the CPU, /healthz and leases don't.
    niceIncrement: NICE_INCREMENT,
    // Tasks talk over their own ports while they run; a thread blocked in Atomics.wait would not hear them.
    atomics: 'disabled',
    resourceLimits: { maxOldGenerationSizeMb: budget.heapMb, maxYoungGenerationSizeMb: 32 },
  })));
}

/** Starts the pool's first thread now, so the first message does not wait for it (a worker's boot). */
export function startMimePool() {
  thePool().catch(() => {}); // a pool that cannot start fails the first message instead
}

/** How many threads the pool has now (none before it starts). */
export async function mimePoolThreads(): Promise<number> {
  return pool ? (await pool).threads.length : 0;
}

/** Changes the budgets (tests make an ordinary message exceed them); the next message starts a new pool. */
export async function setMimeBudget(next: Partial<MimeBudget>) {
  budget = { ...DEFAULT_BUDGET, ...next };
  await closeMimePool();
}

export const mimeBudget = (): Readonly<MimeBudget> => budget;

/** Ends the threads; a task still running is cut short. Shutdown's last step before the database. */
export async function closeMimePool() {
  const current = pool;
  pool = undefined;
  if (current) await (await current).destroy();
}

/** Counts the thread's time on a task: held while it waits (queued, or for bytes, or for a reader). */
class Clock {
  #spent = 0;
  #since = 0;
  #holds = 1; // held until the thread says it started
  #timer: NodeJS.Timeout | undefined;
  constructor(private readonly limitMs: number, private readonly over: () => void) {}
  hold() {
    if (this.#holds++ !== 0) return;
    this.#spent += performance.now() - this.#since;
    clearTimeout(this.#timer);
  }
  release() {
    if (--this.#holds !== 0) return;
    this.#since = performance.now();
    this.#timer = setTimeout(this.over, Math.max(0, this.limitMs - this.#spent));
  }
  stop() {
    this.#holds = Infinity;
    clearTimeout(this.#timer);
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type RunOptions = {
  /** The message, pulled by the thread chunk by chunk. */
  source?: Readable;
  /** Past this many bytes of `source` the message is refused. */
  maxBytes?: number;
  /** Counts the bytes of `source`. */
  onBytes?: (n: number) => void;
  /** The task's port and clock, as the task is handed to the pool. */
  attach?: (port: MessagePort, clock: Clock) => void;
  /** Messages the task sends beyond the stream protocol. */
  onMessage?: (m: PortMessage) => void;
  /** The caller closes the port (after the task's last messages); else it closes when the task ends. */
  keepPort?: boolean;
  /** The caller no longer wants the result: the task stops, no error of the budget's. */
  cancel?: AbortSignal;
};

/** The budget a failed task passed, if it passed one. */
function overBudget(err: unknown, over: boolean, limit: number): MimeBudgetExceeded | undefined {
  if (over) return new MimeBudgetExceeded('time', limit);
  if ((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY') return new MimeBudgetExceeded('heap', budget.heapMb);
  return undefined;
}

/**
 * A task whose input goes whole with it. The thread stamps its start in shared memory; the timer
 * armed at hand-over looks at the stamp when it fires and, while the task is queued or inside
 * its budget, waits again for the rest.
 */
async function runWhole<T>(task: DistributiveOmit<WholeTask, 'started'>): Promise<T> {
  const piscina = await thePool();
  const started = new BigInt64Array(new SharedArrayBuffer(8));
  const abort = new AbortController();
  const limit = budget.timeMs;
  let over = false;
  let timer: NodeJS.Timeout;
  const check = () => {
    const since = Number(Atomics.load(started, 0)) / 1000;
    const left = since === 0 ? limit : limit - (performance.timeOrigin + performance.now() - since);
    if (left > 0) timer = setTimeout(check, left);
    else { over = true; abort.abort(); }
  };
  timer = setTimeout(check, limit);
  try {
    return (await piscina.run({ ...task, started }, { signal: abort.signal })) as T;
  } catch (err) {
    throw overBudget(err, over, limit) ?? new MimeUnreadable((err as Error).message);
  } finally {
    clearTimeout(timer);
  }
}

async function run<T>(task: DistributiveOmit<StreamTask, 'port'>, opts: RunOptions = {}): Promise<T> {
  const piscina = await thePool();
  const { port1, port2 } = new MessageChannel();
  const abort = new AbortController();
  let over = false;
  const limit = budget.timeMs;
  const clock = new Clock(limit, () => { over = true; abort.abort(); });
  const onCancel = () => abort.abort();
  opts.cancel?.addEventListener('abort', onCancel);
  let sourceError: Error | undefined;
  let size = 0;
  const chunks = opts.source?.[Symbol.asyncIterator]() as AsyncIterator<Buffer> | undefined;
  let rest: Buffer | undefined;
  const feed = async () => {
    clock.hold();
    try {
      let chunk = rest;
      rest = undefined;
      if (!chunk) {
        const next = await chunks!.next();
        if (next.done) { port1.postMessage({ t: 'end' } satisfies PortMessage); return; }
        chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value);
        size += chunk.length;
        opts.onBytes?.(chunk.length);
        // An object whose length was not said ahead is stopped where it passes the limit.
        if (opts.maxBytes !== undefined && size > opts.maxBytes) throw new Error(`the message passed ${opts.maxBytes} bytes`);
      }
      if (chunk.length > CHUNK_BYTES) { rest = chunk.subarray(CHUNK_BYTES); chunk = chunk.subarray(0, CHUNK_BYTES); }
      const data = new Uint8Array(chunk).buffer;
      port1.postMessage({ t: 'chunk', data } satisfies PortMessage, [data]);
    } catch (err) {
      sourceError = err as Error;
      port1.postMessage({ t: 'error', message: (err as Error).message } satisfies PortMessage);
    } finally {
      clock.release();
    }
  };
  port1.on('message', (m: PortMessage) => {
    if (m.t === 'start') clock.release();
    else if (m.t === 'pull') void feed();
    else opts.onMessage?.(m);
  });
  opts.attach?.(port1, clock);
  try {
    return (await piscina.run({ ...task, port: port2 }, { transferList: [port2], signal: abort.signal })) as T;
  } catch (err) {
    const passed = overBudget(err, over, limit);
    if (passed) throw passed;
    if (sourceError) throw sourceError;
    if (opts.cancel?.aborted) throw new Error('cancelled');
    throw new MimeUnreadable((err as Error).message);
  } finally {
    clock.stop();
    opts.cancel?.removeEventListener('abort', onCancel);
    if (!opts.keepPort) port1.close();
    // What the thread did not read (it stopped, or failed) is not read at all.
    if (opts.source && !opts.source.readableEnded) opts.source.destroy();
  }
}

/** A message the sink caught, parsed into what it stores. */
export function parseSinkMessage(raw: Buffer, envelope: { from: string; recipients: string[] }): Promise<ParsedSinkMessage> {
  return runWhole({ op: 'sink', raw, envelope });
}

/**
 * A received message, parsed as it streams in (at most `maxBytes`), into what is stored of it;
 * never more than a chunk of it is held on this side. Answers its size too.
 */
export async function readReceived(source: Readable, maxBytes = Infinity): Promise<{ reading: ReceivedReading; size: number }> {
  let size = 0;
  const reading = await run<ReceivedReading>({ op: 'received' }, { source, maxBytes, onBytes: (n) => { size += n; } });
  return { reading, size };
}

/** `text` and `html` of a message submitted over SMTP (none when the parser cannot read it). */
export function readBodies(raw: Buffer): Promise<{ text: string | null; html: string | null }> {
  return runWhole({ op: 'bodies', raw });
}

/** The reply without its quoted history and signature. */
export function stripReply(text: string): Promise<string | null> {
  return runWhole({ op: 'stripReply', text });
}

/** A header value with its RFC 2047 encoded words decoded. */
export function decodeWords(value: string): Promise<string> {
  return runWhole({ op: 'decodeWords', value });
}

/**
 * The `index`th attachment's decoded bytes as the message streams through the thread, or
 * undefined when it has fewer. The thread pauses while the reader is behind (that time is not
 * counted), and stops when the reader goes away.
 */
export function extractAttachment(source: Readable, index: number): Promise<Readable | undefined> {
  const cancel = new AbortController();
  let out: Readable | undefined;
  let paused = false;
  let ended = false;
  let port!: MessagePort;
  let clock!: Clock;
  let found!: (r: Readable) => void;
  const foundOut = new Promise<Readable>((resolve) => { found = resolve; });
  const open = () => {
    if (out) return out;
    out = new Readable({
      read() {
        if (!paused) return;
        paused = false;
        clock.release();
        port.postMessage({ t: 'resume' } satisfies PortMessage);
      },
    });
    out.on('close', () => { if (!ended) cancel.abort(); });
    found(out);
    return out;
  };
  const job = run<boolean>({ op: 'attachment', index }, {
    source,
    keepPort: true,
    cancel: cancel.signal,
    attach(p, c) { port = p; clock = c; },
    onMessage(m) {
      if (m.t === 'out') {
        if (!open().push(Buffer.from(m.data)) && !paused) {
          paused = true;
          clock.hold();
          port.postMessage({ t: 'pause' } satisfies PortMessage);
        }
      } else if (m.t === 'outEnd') {
        ended = true;
        open().push(null);
        port.close();
      }
    },
  });
  job.then(
    (ok) => { if (!ok) port.close(); },
    (err: Error) => { port.close(); out?.destroy(err); },
  );
  return Promise.race([foundOut.then((r) => r as Readable | undefined), job.then((ok) => (ok ? foundOut : undefined))]);
}
