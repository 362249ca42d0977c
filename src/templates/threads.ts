import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import type { ValidationDetail } from '../http/errors.ts';
import { renderParts, RenderTooLarge, templateFromCode, TemplateRuntimeError, type Compiled, type TemplatePart, type Values } from './engine.ts';
import type { PartRef, ThreadReply, ThreadRequest } from './thread.ts';

/**
 * The API's side of the template threads (src/templates/thread.ts): a small pool of worker
 * threads that do every parse, compile and render, so no template, however large, holds the event
 * loop. Work waits here, in one queue per project served in turn, and a thread takes one request
 * at a time: one project's renders can delay another's by at most the renders already running,
 * and a request's time budget starts when a thread takes it, not when it queued. Threads start on
 * first use, are kept only while work is pending (a CLI run still exits), and are started again
 * after one died, ran out of memory or took longer than its budget on one request.
 */

/** A part as the caller holds it: its text and the key the thread caches its compiled form by. */
export type SourcePart = { part: TemplatePart; key: string; source: string };

export const partKey = (part: TemplatePart, source: string) => createHash('sha256').update(part).update('\0').update(source).digest('base64url');
export const sourcePart = (part: TemplatePart, source: string): SourcePart => ({ part, key: partKey(part, source), source });

/** No single request may hold a thread longer; compiling the largest template takes seconds. */
const JOB_TIMEOUT_MS = 60_000;
/**
 * Threads in the pool, and how many one project may use at once: one is always left for the
 * others, so a project's long renders delay another's by at most the render a thread is finishing.
 */
const THREADS = 2;
const MAX_RUNNING_PER_PROJECT = 1;
/** Requests of one project that may wait for a thread; past it, its next ones are refused. */
export const MAX_WAITING_PER_PROJECT = 32;
/** A thread's heap: past it the thread dies and the request is refused, not the process. */
const THREAD_HEAP_MB = 128;
/** Keys this side believes a thread holds, so their sources need not be copied again. */
const MAX_SHIPPED = 10_000;
/**
 * A part whose generated code is at most this size also runs on the event loop, within
 * INLINE_OUTPUT_BYTES of output and INLINE_ITERATIONS loop turns: well under a millisecond, where
 * a round trip to a thread costs a send more than that on a busy machine. A render that would
 * pass either bound stops there and goes to a thread, which has the message's whole budget.
 */
const INLINE_CODE_BYTES = 16 * 1024;
const INLINE_OUTPUT_BYTES = 32 * 1024;
const INLINE_ITERATIONS = 1_000;
/** The event loop's copies of small parts, by key, bounded by their code's bytes. */
const INLINE_CACHE_BYTES = 4 * 1024 * 1024;

const ENTRY = import.meta.url.endsWith('.ts')
  ? new URL('../template-thread.ts', import.meta.url)
  // The production bundle puts the thread's entry beside the chunk this code is in.
  : new URL('./template-thread.js', import.meta.url);

export class TemplateThreadError extends TemplateRuntimeError {}
/** The project already has MAX_WAITING_PER_PROJECT requests waiting for a thread. */
export class TemplateQueueFull extends Error {}

/** What a request asks of a thread; part sources are attached when it is handed to one. */
type Work =
  | { op: 'check'; parts: SourcePart[]; declared: string[] }
  | { op: 'render'; parts: SourcePart[]; values: Values; limit: number; codeFor: string[] };
type Job = { project: string; work: Work; resolve: (r: ThreadReply) => void; reject: (e: Error) => void };
type Stats = { compiles: number; entries: number; bytes: number };

/** One thread of the pool, what it was sent, and the request it is running. */
type Slot = {
  worker: Worker | undefined;
  shipped: Set<string>;
  running: { id: number; job: Job; timer: NodeJS.Timeout; resent: boolean } | undefined;
  asides: Map<number, { resolve: (s: Stats) => void; reject: (e: Error) => void }>;
};

export type PoolOptions = { cacheBytes: number; threads?: number; budgetMs?: number; maxWaiting?: number; maxRunningPerProject?: number };

export class TemplatePool {
  #nextId = 1;
  /** Renders handed to a thread, for tests that check which side rendered. */
  threadRenders = 0;
  readonly #slots: Slot[];
  /** Waiting requests per project; a Map keeps insertion order, so the first key is served next. */
  readonly #queues = new Map<string, Job[]>();
  /** Requests each project has on a thread now. */
  readonly #running = new Map<string, number>();
  /** Small parts this side runs itself (null: too large, always a thread's), oldest first. */
  readonly #inline = new Map<string, { fn: Compiled; bytes: number } | null>();
  #inlineBytes = 0;
  readonly #cacheBytes: number;
  readonly #budgetMs: number;
  readonly #maxWaiting: number;
  readonly #maxRunning: number;

  constructor(options: PoolOptions) {
    const threads = options.threads ?? THREADS;
    // The byte budget is the pool's, shared out, so TEMPLATE_CACHE_MB bounds every thread's cache together.
    this.#cacheBytes = Math.floor(options.cacheBytes / threads);
    this.#budgetMs = options.budgetMs ?? JOB_TIMEOUT_MS;
    this.#maxWaiting = options.maxWaiting ?? MAX_WAITING_PER_PROJECT;
    this.#maxRunning = options.maxRunningPerProject ?? Math.min(MAX_RUNNING_PER_PROJECT, threads);
    this.#slots = Array.from({ length: threads }, () => ({ worker: undefined, shipped: new Set(), running: undefined, asides: new Map() }));
  }

  #start(slot: Slot): Worker {
    const worker = new Worker(ENTRY, { workerData: { cacheBytes: this.#cacheBytes }, resourceLimits: { maxOldGenerationSizeMb: THREAD_HEAP_MB, maxYoungGenerationSizeMb: 16 } });
    worker.on('message', (reply: ThreadReply) => this.#answered(slot, reply));
    const died = (why: string) => {
      if (slot.worker === worker) this.#stop(slot, new TemplateThreadError(why));
    };
    worker.on('error', (err) => died((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'the template needs more memory than a render may use' : err.message));
    worker.on('exit', () => died('the template thread stopped'));
    worker.unref();
    return (slot.worker = worker);
  }

  /** Ends a thread and fails what it was running; what waits goes to a new thread. */
  #stop(slot: Slot, err: Error) {
    const { worker, running } = slot;
    slot.worker = undefined;
    slot.running = undefined;
    slot.shipped.clear();
    if (running) { clearTimeout(running.timer); this.#ended(running.job); running.job.reject(err); }
    for (const [, a] of slot.asides) a.reject(err);
    slot.asides.clear();
    void worker?.terminate();
    this.#pump();
  }

  #answered(slot: Slot, reply: ThreadReply) {
    const aside = slot.asides.get(reply.id);
    if (aside) {
      slot.asides.delete(reply.id);
      if ('stats' in reply) aside.resolve(reply.stats);
      else aside.reject(new TemplateThreadError('no stats'));
    } else {
      const running = slot.running;
      if (!running || running.id !== reply.id) return;
      // The thread dropped some parts (its cache is bounded): send them, within the same budget.
      if ('missing' in reply && !running.resent) {
        running.resent = true;
        slot.shipped.clear();
        this.#post(slot, running.id, running.job.work);
        return;
      }
      clearTimeout(running.timer);
      slot.running = undefined;
      this.#ended(running.job);
      for (const p of running.job.work.parts) {
        if (slot.shipped.size >= MAX_SHIPPED) slot.shipped.clear();
        slot.shipped.add(p.key);
      }
      running.job.resolve(reply);
    }
    if (!slot.running && slot.asides.size === 0) slot.worker?.unref();
    this.#pump();
  }

  #post(slot: Slot, id: number, work: Work) {
    const refs: PartRef[] = work.parts.map((p) => (work.op === 'check' || !slot.shipped.has(p.key) ? { part: p.part, key: p.key, source: p.source } : { part: p.part, key: p.key }));
    slot.worker!.postMessage({ ...work, parts: refs, id } satisfies ThreadRequest);
  }

  /** The next waiting job, taking projects in turn, of a project with a thread to spare. */
  #next(): Job | undefined {
    for (const [project, jobs] of this.#queues) {
      if ((this.#running.get(project) ?? 0) >= this.#maxRunning) continue;
      const job = jobs.shift()!;
      this.#queues.delete(project);
      // Back to the end of the line, behind every other project that waits.
      if (jobs.length) this.#queues.set(project, jobs);
      return job;
    }
    return undefined;
  }

  #started(job: Job) { this.#running.set(job.project, (this.#running.get(job.project) ?? 0) + 1); }
  #ended(job: Job) {
    const n = (this.#running.get(job.project) ?? 1) - 1;
    if (n > 0) this.#running.set(job.project, n);
    else this.#running.delete(job.project);
  }

  /** Hands waiting jobs to idle threads, each to the one that already holds its parts if it can. */
  #pump() {
    for (;;) {
      const idle = this.#slots.filter((s) => !s.running);
      const job = idle.length ? this.#next() : undefined;
      if (!job) break;
      const slot = idle.find((s) => s.worker && job.work.parts.every((p) => s.shipped.has(p.key))) ?? idle.find((s) => s.worker) ?? idle[0]!;
      const worker = slot.worker ?? this.#start(slot);
      const id = this.#nextId++;
      // The budget starts now, when a thread takes the job, however long it waited.
      const timer = setTimeout(() => this.#stop(slot, new TemplateThreadError(`the template took more than ${this.#budgetMs / 1000} s`)), this.#budgetMs);
      timer.unref();
      slot.running = { id, job, timer, resent: false };
      this.#started(job);
      worker.ref();
      this.#post(slot, id, job.work);
    }
    // Work waits: every thread is started, so the one kept for other projects is ready when they
    // come (a thread takes seconds to start). A lone request, such as a CLI run's, starts one.
    if (this.#queues.size) for (const s of this.#slots) if (!s.worker) this.#start(s);
  }

  #request(project: string, work: Work): Promise<ThreadReply> {
    return new Promise((resolve, reject) => {
      const jobs = this.#queues.get(project) ?? [];
      // Jobs wait only while every thread is busy, so this counts the project's waiting ones.
      if (jobs.length >= this.#maxWaiting) {
        reject(new TemplateQueueFull(`${jobs.length} template requests of this project are already waiting`));
        return;
      }
      jobs.push({ project, work, resolve, reject });
      this.#queues.set(project, jobs);
      this.#pump();
    });
  }

  /** The parts as this side runs them, when every one is small and already here. */
  #inlineParts(parts: SourcePart[]): Partial<Record<TemplatePart, Compiled>> | undefined {
    const out: Partial<Record<TemplatePart, Compiled>> = {};
    for (const p of parts) {
      const entry = this.#inline.get(p.key);
      if (!entry) return undefined;
      out[p.part] = entry.fn;
    }
    return out;
  }

  #keepInline(key: string, code: string | undefined) {
    if (this.#inline.has(key) || code === undefined) return;
    if (code.length > INLINE_CODE_BYTES) { this.#inline.set(key, null); return; }
    this.#inline.set(key, { fn: templateFromCode(code), bytes: code.length });
    this.#inlineBytes += code.length;
    for (const [k, e] of this.#inline) {
      if (this.#inlineBytes <= INLINE_CACHE_BYTES && this.#inline.size <= MAX_SHIPPED) break;
      this.#inline.delete(k);
      this.#inlineBytes -= e?.bytes ?? 0;
    }
  }

  /**
   * Checks and compiles a project's parts against the declared variables; answers the problems
   * found. Throws TemplateQueueFull when the project has too many requests waiting.
   */
  async check(project: string, parts: SourcePart[], declared: string[]): Promise<ValidationDetail[]> {
    const reply = await this.#request(project, { op: 'check', parts, declared });
    if ('runtimeError' in reply) throw new TemplateThreadError(reply.runtimeError);
    return 'problems' in reply ? reply.problems : [];
  }

  /**
   * Renders a project's parts with `limit` bytes of output at most. Throws RenderTooLarge past
   * it, TemplateRuntimeError when the template fails, and TemplateQueueFull when the project has
   * too many requests waiting.
   */
  async render(project: string, parts: SourcePart[], values: Values, limit: number): Promise<Record<string, string | null>> {
    const small = this.#inlineParts(parts);
    if (small) {
      try {
        return renderParts(small, values, Math.min(limit, INLINE_OUTPUT_BYTES), INLINE_ITERATIONS);
      } catch (err) {
        // Past the inline bounds: a thread renders it with the message's whole budget.
        if (!(err instanceof RenderTooLarge)) throw err;
      }
    }
    const codeFor = parts.filter((p) => !this.#inline.has(p.key)).map((p) => p.key);
    this.threadRenders++;
    const reply = await this.#request(project, { op: 'render', parts, values, limit, codeFor });
    if ('out' in reply) {
      for (const key of codeFor) this.#keepInline(key, reply.code?.[key]);
      return reply.out;
    }
    if ('tooLarge' in reply) throw new RenderTooLarge(reply.tooLarge);
    if ('runtimeError' in reply) throw new TemplateRuntimeError(reply.runtimeError);
    throw new TemplateThreadError('the template thread answered nothing usable');
  }

  /** The compiled caches of the running threads, summed; asked beside any request they run. */
  async stats(): Promise<Stats> {
    const started = this.#slots.filter((s) => s.worker);
    const each = await Promise.all(started.map((slot) => new Promise<Stats>((resolve, reject) => {
      const id = this.#nextId++;
      slot.asides.set(id, { resolve, reject });
      slot.worker!.ref();
      slot.worker!.postMessage({ op: 'stats', id } satisfies ThreadRequest);
    })));
    return each.reduce((a, s) => ({ compiles: a.compiles + s.compiles, entries: a.entries + s.entries, bytes: a.bytes + s.bytes }), { compiles: 0, entries: 0, bytes: 0 });
  }
}

let cacheBytes = 64 * 1024 * 1024;
let thread: TemplatePool | undefined;

/** TEMPLATE_CACHE_MB, set by the app before the first template is used. */
export function setTemplateCacheBytes(bytes: number) {
  if (bytes === cacheBytes) return;
  cacheBytes = bytes;
  thread = undefined;
}

export function templateThread(): TemplatePool {
  return (thread ??= new TemplatePool({ cacheBytes }));
}
