import { parse } from 'csv-parse/sync';
import { ApiError, ValidationError } from '../../http/errors.ts';
import type { Sql, TxSql } from '../../platform/db.ts';
import { newId } from '../../platform/ids.ts';
import { resolveOptions, type RawFields } from './options.ts';
import { insertChunk, insertImport } from './queries.ts';
import { recordAudit } from '../../audit/record.ts';

/** The upload is stored in pieces of this size; the worker reads one at a time. */
export const CHUNK_BYTES = 1024 * 1024;

/** What every parse of an import's CSV uses, at upload (the header) and in the worker (the rows). */
export const CSV_OPTIONS = { info: true, bom: true, skip_empty_lines: true, relax_column_count: true } as const;

export type ImportSource = {
  /** The CSV's bytes, read once, in order. */
  file: AsyncIterable<Uint8Array>;
  /** The other fields; a multipart form may send them after the file, so they are awaited after it. */
  fields: Promise<RawFields> | RawFields;
};

/**
 * csv-parse counts a CRLF inside a quoted field as two lines; the extra ones, to take off its
 * line numbers (a field keeps its line breaks as written).
 */
export function quotedCrlfs(record: string[]): number {
  let n = 0;
  for (const field of record) for (let i = field.indexOf('\r\n'); i >= 0; i = field.indexOf('\r\n', i + 2)) n++;
  return n;
}

type Header = { columns: string[]; bytes: number; lines: number };

function fileProblem(msg: string): ValidationError {
  return new ValidationError([{ loc: ['body', 'file'], msg, type: 'value_error' }]);
}

/** The header record of the upload's first piece: its columns and where the rows begin. */
function readHeader(first: Buffer, complete: boolean): Header {
  let records: Array<{ record: string[]; info: { bytes: number; lines: number } }>;
  try {
    records = parse(first, { ...CSV_OPTIONS, to: 1 }) as unknown as typeof records;
  } catch (err) {
    throw fileProblem(`the header line is not valid CSV: ${(err as Error).message}`);
  }
  const header = records[0];
  if (!header) throw fileProblem('the file is empty; it needs a header line and rows');
  if (!complete && header.info.bytes === first.length && first[first.length - 1] !== 0x0a) throw fileProblem(`the header line is longer than ${CHUNK_BYTES} bytes`);
  return { columns: header.record, bytes: header.info.bytes, lines: header.info.lines - quotedCrlfs(header.record) };
}

/**
 * Streams the upload into `contact_import_chunks`, at most `maxBytes`, holding one piece in
 * memory. Past the limit it stops reading and answers 413; the transaction leaves nothing.
 */
async function storeFile(tx: TxSql, projectId: string, importId: string, file: AsyncIterable<Uint8Array>, maxBytes: number) {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let stored = 0;
  let seq = 0;
  let header: Header | undefined;
  const flush = async (complete: boolean) => {
    const data = Buffer.concat(pending, pendingBytes);
    pending = [];
    pendingBytes = 0;
    header ??= readHeader(data, complete);
    await insertChunk(tx, projectId, importId, seq++, stored, data);
    stored += data.length;
  };
  for await (const piece of file) {
    if (stored + pendingBytes + piece.length > maxBytes) throw new ApiError('payload_too_large', `The file exceeds ${maxBytes} bytes (CONTACT_IMPORT_MAX_BYTES).`);
    pending.push(Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength));
    pendingBytes += piece.length;
    if (pendingBytes >= CHUNK_BYTES) await flush(false);
  }
  if (pendingBytes > 0 || seq === 0) await flush(true);
  return { bytes: stored, header: header! };
}

/**
 * Creates an import from a CSV upload: the file, the import's row and its
 * `contacts_import__run` job and its audit entry commit together or not at all. The API, the
 * dashboard and the CLI all come here.
 */
export async function createImport(sql: Sql, projectId: string, source: ImportSource, maxBytes: number) {
  const id = newId('contactImport');
  return sql.begin(async (tx) => {
    const { bytes, header } = await storeFile(tx, projectId, id, source.file, maxBytes);
    const options = await resolveOptions(tx, projectId, await source.fields, header.columns);
    const row = await insertImport(tx, {
      id,
      projectId,
      onConflict: options.onConflict,
      header: header.columns,
      plan: options.plan,
      segmentIds: options.segmentIds,
      topics: options.topics,
      bytesTotal: bytes,
      bytesDone: header.bytes,
      linesDone: header.lines,
    });
    // One entry for the import, by whoever uploaded it; the contacts it then creates and updates
    // are the worker's doing for that entry, not an entry each.
    await recordAudit(tx, {
      action: 'contact_import.created', projectId, target: { type: 'contact_import', id: row.id },
      changes: { on_conflict: options.onConflict, segment_ids: options.segmentIds, topic_ids: options.topics.map((t) => t.id), bytes },
    });
    return { id: row.id, createdAt: row.createdAt };
  });
}
