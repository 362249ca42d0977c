import { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import busboy from 'busboy';
import type { Context } from 'hono';
import { ApiError, ValidationError } from '../../http/errors.ts';
import type { RawFields } from './options.ts';
import type { ImportSource } from './service.ts';

const FIELDS = new Set(['column_map', 'segments', 'topics', 'on_conflict']);
/** Room for the other fields and the multipart framing beside the file. */
const FIELDS_BYTES = 1024 * 1024;

const unreadable = (why: string) => new ValidationError([{ loc: ['body'], msg: `The multipart body could not be read: ${why}`, type: 'body_incomplete' }]);

/** The file part's bytes, a multipart error turned into the API's 422. */
async function* fileBytes(stream: Readable): AsyncGenerator<Uint8Array> {
  try {
    for await (const piece of stream) yield piece as Uint8Array;
  } catch (err) {
    throw unreadable((err as Error).message);
  }
}

/**
 * A multipart/form-data import request as an import source, parsed by busboy as it arrives: the
 * `file` part is handed on as a stream (never buffered whole), the other fields as they come,
 * before or after the file.
 */
export async function multipartSource(c: Context, maxBytes: number): Promise<ImportSource> {
  const type = c.req.header('content-type') ?? '';
  if (!/^multipart\/form-data/i.test(type)) {
    throw new ValidationError([{ loc: ['header', 'content-type'], msg: 'The body must be multipart/form-data with a `file` part', type: 'value_error' }]);
  }
  const declared = c.req.header('content-length');
  if (declared && /^\d+$/.test(declared) && Number(declared) > maxBytes + FIELDS_BYTES) {
    throw new ApiError('payload_too_large', `The file exceeds ${maxBytes} bytes (CONTACT_IMPORT_MAX_BYTES).`);
  }
  let bb: busboy.Busboy;
  try {
    bb = busboy({ headers: { 'content-type': type }, limits: { files: 1, fields: 10, parts: 20, fieldSize: FIELDS_BYTES / 4 } });
  } catch (err) {
    throw unreadable((err as Error).message);
  }
  const fields: RawFields = {};
  bb.on('field', (name, value) => { if (FIELDS.has(name)) fields[name as keyof RawFields] = value; });
  const closed = new Promise<RawFields>((resolve, reject) => {
    bb.on('close', () => resolve(fields));
    bb.on('error', (err) => reject(unreadable((err as Error).message)));
  });
  closed.catch(() => {}); // seen by whoever awaits the fields; the upload may fail first
  const file = new Promise<Readable>((resolve, reject) => {
    bb.on('file', (name, stream) => (name === 'file' ? resolve(stream) : stream.resume()));
    closed.then(() => reject(new ValidationError([{ loc: ['body', 'file'], msg: 'Field required: a CSV file part named `file`', type: 'missing' }])), reject);
  });

  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const body = incoming instanceof IncomingMessage && !incoming.readableDidRead && !c.req.raw.bodyUsed
    ? incoming
    : c.req.raw.body ? Readable.fromWeb(c.req.raw.body as never) : Readable.from([]);
  body.on('error', (err) => bb.destroy(err));
  body.pipe(bb);
  return { file: fileBytes(await file), fields: closed };
}
