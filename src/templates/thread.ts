import type { MessagePort } from 'node:worker_threads';
import type { ValidationDetail } from '../http/errors.ts';
import { checkSource, compilePart, renderParts, RenderTooLarge, TemplateProblem, TemplateRuntimeError, type CompiledPart, type TemplatePart, type Values } from './engine.ts';

/**
 * The template thread's side: every parse, compile and render of a template runs here, off the
 * API's event loop (compiling a 500 KB template takes Handlebars seconds). Compiled parts are
 * kept by the hash of their source, up to a byte budget, so a template is compiled once when it
 * is checked and then serves its draft's previews and every published version with that text.
 */

/** One part of a request: its cache key (a hash of part and source), and the source when sent. */
export type PartRef = { part: TemplatePart; key: string; source?: string };

export type ThreadRequest =
  | { id: number; op: 'check'; parts: PartRef[]; declared: string[] }
  | { id: number; op: 'render'; parts: PartRef[]; values: Values; limit: number; codeFor?: string[] }
  | { id: number; op: 'stats' };

export type ThreadReply = { id: number } & (
  | { problems: ValidationDetail[] }
  | { out: Record<string, string | null>; code?: Record<string, string> }
  | { missing: string[] }
  | { tooLarge: number }
  | { runtimeError: string }
  | { stats: { compiles: number; entries: number; bytes: number } }
);

/** Compiled parts by key, oldest first (a Map keeps insertion order; a hit moves to the end). */
class CompiledCache {
  readonly #entries = new Map<string, CompiledPart>();
  #bytes = 0;
  compiles = 0;
  constructor(private readonly budgetBytes: number) {}

  get(key: string) {
    const hit = this.#entries.get(key);
    if (hit) { this.#entries.delete(key); this.#entries.set(key, hit); }
    return hit;
  }

  set(key: string, entry: CompiledPart) {
    this.compiles++;
    const old = this.#entries.get(key);
    if (old) { this.#bytes -= old.bytes; this.#entries.delete(key); }
    // A part larger than the whole budget is used once and not kept.
    if (entry.bytes > this.budgetBytes) return;
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    for (const [k, e] of this.#entries) {
      if (this.#bytes <= this.budgetBytes) break;
      this.#entries.delete(k);
      this.#bytes -= e.bytes;
    }
  }

  stats() { return { compiles: this.compiles, entries: this.#entries.size, bytes: this.#bytes }; }
}

export function serveTemplates(port: MessagePort, cacheBytes: number) {
  const cache = new CompiledCache(cacheBytes);

  const handle = (req: ThreadRequest): ThreadReply => {
    const { id } = req;
    if (req.op === 'stats') return { id, stats: cache.stats() };
    if (req.op === 'check') {
      const declared = new Set(req.declared);
      const problems: ValidationDetail[] = [];
      for (const p of req.parts) {
        try {
          cache.set(p.key, checkSource(p.part, p.source!, declared));
        } catch (err) {
          if (!(err instanceof TemplateProblem)) throw err;
          problems.push(err.detail());
        }
      }
      return { id, problems };
    }
    const parts: Partial<Record<TemplatePart, CompiledPart['fn']>> = {};
    const code: Record<string, string> = {};
    const missing: string[] = [];
    for (const p of req.parts) {
      let compiled = cache.get(p.key);
      if (!compiled && p.source !== undefined) {
        // Checked when it was stored, so compiled as it is.
        compiled = compilePart(p.part, p.source);
        cache.set(p.key, compiled);
      }
      if (!compiled) missing.push(p.key);
      else parts[p.part] = compiled.fn;
      if (compiled && req.codeFor?.includes(p.key)) code[p.key] = compiled.code;
    }
    if (missing.length) return { id, missing };
    try {
      // Structured cloning gave the values a prototype again; a render sees own keys only.
      const values = Object.assign(Object.create(null) as Values, req.values);
      const out = renderParts(parts, values, req.limit) as Record<string, string | null>;
      return req.codeFor?.length ? { id, out, code } : { id, out };
    } catch (err) {
      if (err instanceof RenderTooLarge) return { id, tooLarge: err.sizeBytes };
      if (err instanceof TemplateRuntimeError) return { id, runtimeError: err.message };
      throw err;
    }
  };

  port.on('message', (req: ThreadRequest) => {
    let reply: ThreadReply;
    try {
      reply = handle(req);
    } catch (err) {
      reply = { id: req.id, runtimeError: (err as Error)?.message ?? String(err) };
    }
    port.postMessage(reply);
  });
}
