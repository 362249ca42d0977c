import { IncomingMessage } from 'node:http';
import type { Context, MiddlewareHandler } from 'hono';
import { ApiError, ValidationError } from './errors.ts';

// No `Connection: close` here: closing with the upload still arriving makes the kernel reset the
// connection, and the client may lose the 413 itself. The Node adapter instead discards what
// still comes for a short while (bounded in time and bytes), then closes.
function tooLarge(limitBytes: number): ApiError {
  return new ApiError('payload_too_large', `Request body exceeds ${limitBytes} bytes.`);
}

/** What a route reads its body from: the request, and the Node request behind it when there is one. */
type BodySource = { req: { raw: Request }; env?: unknown };

/**
 * Reads a request body up to `limitBytes`. A declared Content-Length over the limit is refused
 * before anything is read; a chunked or understated body is counted as it streams and abandoned
 * the moment it passes the limit, so an oversized upload is never held in memory.
 *
 * Under @hono/node-server the bytes come straight from Node's IncomingMessage: asking the
 * request for its web stream instead would build a full Request and a stream adapter for every
 * call, the larger part of the cost of a small send.
 */
export async function readBoundedBody(c: BodySource, limitBytes: number, inspect?: (chunk: Uint8Array) => void): Promise<Buffer> {
  const req = c.req.raw;
  const declared = req.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limitBytes) throw tooLarge(limitBytes);
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  // A request whose client already left goes the adapter's way, which recovers a body that
  // arrived whole before the disconnect.
  if (incoming instanceof IncomingMessage && !incoming.destroyed && !incoming.readableDidRead && !req.bodyUsed) {
    return readIncoming(incoming, limitBytes, inspect);
  }
  return readWebBody(req, limitBytes, inspect);
}

function bodyIncomplete(): ValidationError {
  return new ValidationError([{ loc: ['body'], msg: 'The request body could not be read', type: 'body_incomplete' }]);
}

/**
 * Past the limit it stops listening and pauses; once the answer is out, the Node adapter reads
 * and discards the rest for a short while, then closes.
 */
function readIncoming(incoming: IncomingMessage, limitBytes: number, inspect?: (chunk: Uint8Array) => void): Promise<Buffer> {
  if (incoming.readableEnded) return Promise.resolve(Buffer.alloc(0));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      incoming.off('data', onData);
      incoming.off('end', onEnd);
      incoming.off('error', onFailure);
      incoming.off('close', onFailure);
    };
    const refuse = (err: unknown) => {
      stop();
      incoming.pause();
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) return refuse(tooLarge(limitBytes));
      try {
        inspect?.(chunk);
      } catch (err) {
        return refuse(err);
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      stop();
      resolve(Buffer.concat(chunks, size));
    };
    // The client went away mid-upload; nobody reads this answer, but it must not be a 500.
    const onFailure = () => {
      stop();
      reject(bodyIncomplete());
    };
    incoming.on('data', onData);
    incoming.once('end', onEnd);
    incoming.once('error', onFailure);
    incoming.once('close', onFailure);
  });
}

async function readWebBody(req: Request, limitBytes: number, inspect?: (chunk: Uint8Array) => void): Promise<Buffer> {
  if (!req.body) return Buffer.alloc(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let step: ReadableStreamReadResult<Uint8Array>;
    try {
      step = await reader.read();
    } catch {
      throw bodyIncomplete();
    }
    const { done, value } = step;
    if (done) break;
    size += value.byteLength;
    if (size > limitBytes) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limitBytes);
    }
    try {
      inspect?.(value);
    } catch (err) {
      await reader.cancel().catch(() => {});
      throw err;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * A bounded read parsed as JSON; malformed input is the spec's 422 `json_invalid`. The bytes are
 * checked by jsonShapeGuard as they stream, so a body that no route could take (a map of a
 * million headers) is refused before it is parsed.
 */
export async function readJsonBody(c: BodySource, limitBytes: number): Promise<unknown> {
  return parseJson(await readBoundedBody(c, limitBytes, jsonShapeGuard()));
}

/**
 * Reads a JSON body that should be an array of at most `maxItems` elements, and refuses it the
 * moment its top-level element number `maxItems + 1` starts to arrive: a 20 MiB array of `{}`
 * holds millions of items, and parsing it (let alone validating each) would hold the event loop
 * for seconds. The count runs over the bytes as they stream in, so the refusal costs a few
 * hundred bytes of scanning whatever follows. A body that is not an array is parsed as usual, and
 * the caller reports its shape.
 */
export async function readJsonArrayBody(c: BodySource, limitBytes: number, maxItems: number, tooMany: () => Error): Promise<unknown> {
  const counter = topLevelArrayCounter();
  const guard = jsonShapeGuard();
  const bytes = await readBoundedBody(c, limitBytes, (chunk) => {
    if (counter(chunk) > maxItems) throw tooMany();
    guard(chunk);
  });
  return parseJson(bytes);
}

const START = 0, IN_ARRAY = 1, NOT_ARRAY = 2;

/**
 * Counts the elements of a top-level JSON array over successive chunks: an element starts at the
 * first significant byte after `[` or after a comma at depth 1. Only structure is tracked (depth,
 * strings and their escapes); UTF-8 continuation bytes never equal an ASCII byte, so bytes are
 * scanned directly. Malformed JSON is left to the parser: the count only ever stops a read early.
 */
export function topLevelArrayCounter(): (chunk: Uint8Array) => number {
  let state: number = START;
  let depth = 0;
  let inString = false;
  let escaped = false;
  let expectElement = false;
  let count = 0;
  return (chunk) => {
    if (state === NOT_ARRAY) return count;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (b === 0x5c) escaped = true; // backslash
        else if (b === 0x22) inString = false; // "
        continue;
      }
      if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) continue;
      if (state === START) {
        if (b === 0xef || b === 0xbb || b === 0xbf) continue; // a byte-order mark; the parser decides
        if (b !== 0x5b) { state = NOT_ARRAY; return count; } // not `[`
        state = IN_ARRAY;
        depth = 1;
        expectElement = true;
        continue;
      }
      if (depth === 1 && expectElement && b !== 0x5d) { // `]` closes an empty array or a trailing comma
        count++;
        expectElement = false;
      }
      if (b === 0x22) inString = true;
      else if (b === 0x5b || b === 0x7b) depth++;
      else if (b === 0x5d || b === 0x7d) depth--;
      else if (b === 0x2c && depth === 1) expectElement = true;
    }
    return count;
  };
}

/**
 * No object or list in any request body of the API holds more than this many entries (the
 * largest allowed are a batch of 100 and 100 template variables), nor nests deeper.
 */
export const MAX_JSON_ENTRIES = 1000;
export const MAX_JSON_DEPTH = 64;
/**
 * Nor more values in all (every value counts, objects and lists included, the outermost too): a
 * million small lists, none over the entry bound, still take JSON.parse most of a second.
 */
export const MAX_JSON_VALUES = 100_000;

type Frame = { array: boolean; count: number; key: string; expect: boolean };

/**
 * Counts the entries of every JSON object and list, their depth and the values of the whole body,
 * over successive chunks of a body, and throws a 422 naming the first container past a bound the
 * moment its entry `maxEntries + 1` starts to arrive, or the body's value `maxValues + 1`:
 * JSON.parse of 20 MiB of one-line headers takes the event loop for most of a second before
 * anything could count them. Only structure is tracked; malformed JSON is left to the parser.
 */
export function jsonShapeGuard(maxEntries = MAX_JSON_ENTRIES, maxDepth = MAX_JSON_DEPTH, maxValues = MAX_JSON_VALUES): (chunk: Uint8Array) => void {
  const stack: Frame[] = [];
  // An entry of an object or list is one value (a member counts by its value); the body itself is one more.
  let values = 0;
  const countValue = () => {
    if (++values > maxValues) {
      throw new ValidationError([{
        loc: ['body'], msg: `At most ${maxValues} values in one JSON body`, type: 'too_many_values', ctx: { max_values: maxValues },
      }]);
    }
  };
  let inString = false;
  let escaped = false;
  let key: number[] | undefined; // the bytes of an object key being read
  const loc = (upTo: number) => ['body', ...stack.slice(0, upTo).map((f) => (f.array ? f.count - 1 : f.key))];
  const decodeKey = (bytes: number[]) => {
    const raw = Buffer.from(bytes).toString('utf8');
    try { return JSON.parse(`"${raw}"`) as string; } catch { return raw; }
  };
  return (chunk) => {
    for (let i = 0; i < chunk.length; i++) {
      if (inString) {
        if (!key && !escaped) {
          // Inside a value string: skip to its next quote or backslash natively.
          const quote = chunk.indexOf(0x22, i);
          const slash = chunk.indexOf(0x5c, i);
          const next = quote < 0 ? slash : slash < 0 ? quote : Math.min(quote, slash);
          if (next < 0) return;
          i = next;
        }
        const b = chunk[i]!;
        if (escaped) escaped = false;
        else if (b === 0x5c) escaped = true;
        else if (b === 0x22) {
          inString = false;
          if (key) { stack.at(-1)!.key = decodeKey(key); key = undefined; }
          continue;
        }
        if (key && key.length < 256) key.push(b);
        continue;
      }
      const b = chunk[i]!;
      if (b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09) continue;
      const top = stack.at(-1);
      if (!top && values === 0) countValue(); // the body's own value
      if (top?.expect && b !== 0x5d && b !== 0x7d) { // not `]` or `}`: an entry starts
        top.expect = false;
        countValue();
        if (++top.count > maxEntries) {
          throw new ValidationError([{
            loc: loc(stack.length - 1), msg: `At most ${maxEntries} entries in one object or list`, type: 'too_long', ctx: { max_length: maxEntries },
          }]);
        }
        if (!top.array && b === 0x22) { inString = true; key = []; continue; }
      }
      if (b === 0x22) inString = true;
      else if (b === 0x7b || b === 0x5b) { // `{` or `[`
        if (stack.length >= maxDepth) {
          throw new ValidationError([{ loc: loc(stack.length), msg: `JSON nested deeper than ${maxDepth} levels`, type: 'too_deep', ctx: { max_depth: maxDepth } }]);
        }
        stack.push({ array: b === 0x5b, count: 0, key: '', expect: true });
      } else if (b === 0x7d || b === 0x5d) stack.pop();
      else if (b === 0x2c && top) top.expect = true;
    }
  };
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(decoder.decode(bytes));
  } catch (err) {
    throw new ValidationError([{
      loc: ['body'],
      msg: 'Malformed JSON in request body',
      type: 'json_invalid',
      ctx: { error: err instanceof Error ? err.message : 'invalid JSON' },
    }]);
  }
}

/** Why a bounded `c.req.json()` was refused, kept for onError: the json validator replaces any error of it by a bare 400. */
const refusedReads = new WeakMap<object, Error>();

/**
 * Makes `c.req.json()` (what the routes' json validator calls) a bounded, guarded read like
 * readJsonBody, so no JSON route parses an unbounded body, whichever way it reads.
 */
export function boundJsonReads(limitBytes: number): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') {
      let read: Promise<unknown> | undefined;
      c.req.json = <T>() => {
        read ??= readJsonBody(c, limitBytes).catch((err: unknown) => {
          if (err instanceof Error) refusedReads.set(c.req, err);
          throw err;
        });
        return read as Promise<T>;
      };
    }
    await next();
  };
}

/** The refusal behind a failed `c.req.json()` of this request, if boundJsonReads refused it. */
export function refusedJsonRead(c: Context): Error | undefined {
  return refusedReads.get(c.req);
}
