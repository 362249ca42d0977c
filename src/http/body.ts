import { ApiError, ValidationError } from './errors.ts';

// No `Connection: close` here: closing with the upload still arriving makes the kernel reset the
// connection, and the client may lose the 413 itself. The Node adapter instead discards what
// still comes for a short while (bounded in time and bytes), then closes.
function tooLarge(limitBytes: number): ApiError {
  return new ApiError('payload_too_large', `Request body exceeds ${limitBytes} bytes.`);
}

/**
 * Reads a request body up to `limitBytes`. A declared Content-Length over the limit is refused
 * before anything is read; a chunked or understated body is counted as it streams and abandoned
 * the moment it passes the limit, so an oversized upload is never held in memory.
 */
export async function readBoundedBody(req: Request, limitBytes: number): Promise<Buffer> {
  const declared = req.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > limitBytes) throw tooLarge(limitBytes);
  if (!req.body) return Buffer.alloc(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let step: ReadableStreamReadResult<Uint8Array>;
    try {
      step = await reader.read();
    } catch {
      // The client went away mid-upload; nobody reads this answer, but it must not be a 500.
      throw new ValidationError([{ loc: ['body'], msg: 'The request body could not be read', type: 'body_incomplete' }]);
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
export async function readJsonBody(req: Request, limitBytes: number): Promise<unknown> {
  const bytes = await readBoundedBody(req, limitBytes);
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
