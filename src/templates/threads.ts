import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import type { ValidationDetail } from '../http/errors.ts';
import { renderParts, RenderTooLarge, templateFromCode, TemplateRuntimeError, type Compiled, type TemplatePart, type Values } from './engine.ts';
import type { PartRef, ThreadReply, ThreadRequest } from './thread.ts';

/**
 * The API's side of the template thread (src/templates/thread.ts): one worker thread that does
 * every parse, compile and render, so no template, however large, holds the event loop. Requests
 * queue in the thread and are answered in order. The thread starts on first use, is kept only
 * while work is pending (a CLI run still exits), and is started again after it died, ran out of
 * memory or took longer than JOB_TIMEOUT_MS on one request.
 */

/** A part as the caller holds it: its text and the key the thread caches its compiled form by. */
export type SourcePart = { part: TemplatePart; key: string; source: string };

export const partKey = (part: TemplatePart, source: string) => createHash('sha256').update(part).update('\0').update(source).digest('base64url');
export const sourcePart = (part: TemplatePart, source: string): SourcePart => ({ part, key: partKey(part, source), source });

/** No single request may hold the thread longer; compiling the largest template takes seconds. */
const JOB_TIMEOUT_MS = 60_000;
/** The thread's heap: past it the thread dies and the request is refused, not the process. */
const THREAD_HEAP_MB = 128;
/** Keys this side believes the thread holds, so their sources need not be copied again. */
const MAX_SHIPPED = 10_000;
/**
 * A part whose generated code is at most this size also runs on the event loop, within
 * INLINE_OUTPUT_BYTES of output and INLINE_ITERATIONS loop turns: well under a millisecond, where
 * a round trip to the thread costs a send more than that on a busy machine. A render that would
 * pass either bound stops there and goes to the thread, which has the message's whole budget.
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

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Pending = { resolve: (r: ThreadReply) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

class TemplateThread {
  #worker: Worker | undefined;
  #nextId = 1;
  /** Renders handed to the thread, for tests that check which side rendered. */
  threadRenders = 0;
  readonly #pending = new Map<number, Pending>();
  readonly #shipped = new Set<string>();
  /** Small parts this side runs itself (null: too large, always the thread's), oldest first. */
  readonly #inline = new Map<string, { fn: Compiled; bytes: number } | null>();
  #inlineBytes = 0;

  constructor(private readonly cacheBytes: number) {}

  #start(): Worker {
    const worker = new Worker(ENTRY, { workerData: { cacheBytes: this.cacheBytes }, resourceLimits: { maxOldGenerationSizeMb: THREAD_HEAP_MB, maxYoungGenerationSizeMb: 16 } });
    worker.on('message', (reply: ThreadReply) => {
      const p = this.#pending.get(reply.id);
      if (!p) return;
      this.#pending.delete(reply.id);
      clearTimeout(p.timer);
      if (this.#pending.size === 0) worker.unref();
      p.resolve(reply);
    });
    const died = (why: string) => {
      if (this.#worker !== worker) return;
      this.#stop(new TemplateThreadError(why));
    };
    worker.on('error', (err) => died((err as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'the template needs more memory than a render may use' : err.message));
    worker.on('exit', () => died('the template thread stopped'));
    worker.unref();
    return worker;
  }

  #stop(err: Error) {
    const worker = this.#worker;
    this.#worker = undefined;
    this.#shipped.clear();
    for (const [, p] of this.#pending) { clearTimeout(p.timer); p.reject(err); }
    this.#pending.clear();
    void worker?.terminate();
  }

  #request(req: DistributiveOmit<ThreadRequest, 'id'>): Promise<ThreadReply> {
    const worker = (this.#worker ??= this.#start());
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.#stop(new TemplateThreadError(`the template took more than ${JOB_TIMEOUT_MS / 1000} s`)), JOB_TIMEOUT_MS);
      timer.unref();
      this.#pending.set(id, { resolve, reject, timer });
      worker.ref();
      worker.postMessage({ ...req, id });
    });
  }

  #refs(parts: SourcePart[], withSources: boolean): PartRef[] {
    return parts.map((p) => (withSources || !this.#shipped.has(p.key) ? { part: p.part, key: p.key, source: p.source } : { part: p.part, key: p.key }));
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

  #remember(parts: SourcePart[]) {
    for (const p of parts) {
      if (this.#shipped.size >= MAX_SHIPPED) this.#shipped.clear();
      this.#shipped.add(p.key);
    }
  }

  /** Checks and compiles parts against the declared variables; answers the problems found. */
  async check(parts: SourcePart[], declared: string[]): Promise<ValidationDetail[]> {
    const reply = await this.#request({ op: 'check', parts: this.#refs(parts, true), declared });
    if ('runtimeError' in reply) throw new TemplateThreadError(reply.runtimeError);
    this.#remember(parts);
    return 'problems' in reply ? reply.problems : [];
  }

  /**
   * Renders parts with `limit` bytes of output at most. Throws RenderTooLarge past it, and
   * TemplateRuntimeError when the template fails.
   */
  async render(parts: SourcePart[], values: Values, limit: number): Promise<Record<string, string | null>> {
    const small = this.#inlineParts(parts);
    if (small) {
      try {
        return renderParts(small, values, Math.min(limit, INLINE_OUTPUT_BYTES), INLINE_ITERATIONS);
      } catch (err) {
        // Past the inline bounds: the thread renders it with the message's whole budget.
        if (!(err instanceof RenderTooLarge)) throw err;
      }
    }
    const codeFor = parts.filter((p) => !this.#inline.has(p.key)).map((p) => p.key);
    this.threadRenders++;
    let reply = await this.#request({ op: 'render', parts: this.#refs(parts, false), values, limit, codeFor });
    // The thread dropped some (its cache is bounded, or it restarted): send them this time.
    if ('missing' in reply) reply = await this.#request({ op: 'render', parts: this.#refs(parts, true), values, limit, codeFor });
    this.#remember(parts);
    if ('out' in reply) {
      for (const key of codeFor) this.#keepInline(key, reply.code?.[key]);
      return reply.out;
    }
    if ('tooLarge' in reply) throw new RenderTooLarge(reply.tooLarge);
    if ('runtimeError' in reply) throw new TemplateRuntimeError(reply.runtimeError);
    throw new TemplateThreadError('the template thread answered nothing usable');
  }

  async stats() {
    const reply = await this.#request({ op: 'stats' });
    if (!('stats' in reply)) throw new TemplateThreadError('no stats');
    return reply.stats;
  }
}

let cacheBytes = 64 * 1024 * 1024;
let thread: TemplateThread | undefined;

/** TEMPLATE_CACHE_MB, set by the app before the first template is used. */
export function setTemplateCacheBytes(bytes: number) {
  if (bytes === cacheBytes) return;
  cacheBytes = bytes;
  thread = undefined;
}

export function templateThread(): TemplateThread {
  return (thread ??= new TemplateThread(cacheBytes));
}
