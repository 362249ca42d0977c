import { IncomingMessage } from 'node:http';
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
export async function readBoundedBody(c: BodySource, limitBytes: number): Promise<Buffer> {
  const req = c.req.raw;
  const declared = req.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limitBytes) throw tooLarge(limitBytes);
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  // A request whose client already left goes the adapter's way, which recovers a body that
  // arrived whole before the disconnect.
  if (incoming instanceof IncomingMessage && !incoming.destroyed && !incoming.readableDidRead && !req.bodyUsed) {
    return readIncoming(incoming, limitBytes);
  }
  return readWebBody(req, limitBytes);
}

function bodyIncomplete(): ValidationError {
  return new ValidationError([{ loc: ['body'], msg: 'The request body could not be read', type: 'body_incomplete' }]);
}

/**
 * Past the limit it stops listening and pauses; once the answer is out, the Node adapter reads
 * and discards the rest for a short while, then closes.
 */
function readIncoming(incoming: IncomingMessage, limitBytes: number): Promise<Buffer> {
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
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limitBytes) {
        stop();
        incoming.pause();
        reject(tooLarge(limitBytes));
        return;
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

async function readWebBody(req: Request, limitBytes: number): Promise<Buffer> {
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
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** A bounded read parsed as JSON; malformed input is the spec's 422 `json_invalid`. */
export async function readJsonBody(c: BodySource, limitBytes: number): Promise<unknown> {
  const bytes = await readBoundedBody(c, limitBytes);
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
