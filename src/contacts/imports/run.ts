import { pipeline, Readable } from 'node:stream';
import { parse, CsvError } from 'csv-parse';
import type { Sql } from '../../platform/db.ts';
import { newId } from '../../platform/ids.ts';
import { CSV_OPTIONS, quotedCrlfs } from './service.ts';
import { checkRow } from './rows.ts';
import {
  addToSegments, advanceImport, chunkAt, finishImport, insertContacts, setTopics, startImport, updateContacts,
  type ContactInput, type ImportError, type ImportRow,
} from './queries.ts';

/** Rows per transaction: large enough that a round trip is small beside the rows' own cost. */
export const BATCH_ROWS = 5000;
/** How many `{line, reason}` an import keeps. */
export const MAX_ERRORS = 100;

/** What the parser hands on per record, instead of its own info object: less garbage a row. */
type Parsed = [record: string[], bytes: number, lines: number];

/** How much of a stored piece the parser is given at once: it parses what it is given whole, whatever the backpressure. */
const SLICE_BYTES = 64 * 1024;

/** The stored upload from `offset` on, one piece read at a time, in slices. */
async function* uploadFrom(sql: Sql, projectId: string, importId: string, offset: number): AsyncGenerator<Buffer> {
  let chunk = await chunkAt(sql, projectId, importId, { offset });
  let from = chunk ? offset - chunk.startByte : 0;
  while (chunk) {
    for (let i = from; i < chunk.data.length; i += SLICE_BYTES) yield chunk.data.subarray(i, i + SLICE_BYTES);
    from = 0;
    chunk = await chunkAt(sql, projectId, importId, { after: chunk.seq });
  }
}

class Batch {
  readonly rows: ContactInput[] = [];
  readonly keys = new Set<string>();
  readonly errors: ImportError[] = [];
  total = 0;
  failed = 0;
  /** The cursor after the batch's last record. */
  bytes = 0;
  lines = 0;
}

/** Thrown when the import's row has moved on without this run: another run holds it. */
class LostImport extends Error {}

/**
 * Runs an import from its cursor to the end. Each batch of rows commits with the cursor moved
 * past it, so a run killed at any point is continued by the next from the last commit, with the
 * counts exact. At most one batch is being written while the next is parsed.
 */
export async function runImport(sql: Sql, projectId: string, importId: string, opts: { batchRows?: number } = {}): Promise<ImportRow | undefined> {
  const imp = await startImport(sql, projectId, importId);
  if (!imp) return undefined;
  const batchRows = opts.batchRows ?? BATCH_ROWS;
  const baseBytes = imp.bytesDone;
  const baseLines = imp.linesDone;
  let errorsKept = imp.errors.length;
  let cursorBytes = imp.bytesDone;

  const write = async (batch: Batch) => {
    const created = new Set<string>();
    let updated = 0;
    await sql.begin(async (tx) => {
      const touched: string[] = [];
      if (batch.rows.length) {
        for (const r of await insertContacts(tx, projectId, batch.rows)) { created.add(r.id); touched.push(r.id); }
        const existing = batch.rows.filter((r) => !created.has(r.id));
        if (imp.onConflict === 'upsert' && existing.length) {
          const ids = (await updateContacts(tx, projectId, existing)).map((r) => r.id);
          updated = ids.length;
          touched.push(...ids);
        }
        if (imp.segmentIds.length && touched.length) await addToSegments(tx, projectId, imp.segmentIds, touched);
        if (imp.topics.length && touched.length) await setTopics(tx, projectId, imp.topics, touched);
      }
      const moved = await advanceImport(tx, projectId, importId, {
        fromBytes: cursorBytes, bytes: batch.bytes, lines: batch.lines, total: batch.total, created: created.size, updated,
        skipped: batch.rows.length - created.size - updated, failed: batch.failed, errors: batch.errors,
      });
      if (!moved) throw new LostImport(`import ${importId} was moved on by another run`);
    });
    cursorBytes = batch.bytes;
  };

  const { info: _info, ...options } = CSV_OPTIONS;
  const parser = parse({ ...options, bom: baseBytes === 0, on_record: (record: string[], context: { bytes: number; lines: number }) => [record, context.bytes, context.lines] as unknown as string[] });
  // A failed read of the upload destroys the parser with its error, which the loop below throws.
  // One slice read ahead at most, so the worker holds one stored piece and two batches.
  pipeline(Readable.from(uploadFrom(sql, projectId, importId, baseBytes), { highWaterMark: 1 }), parser, () => {});
  let batch = new Batch();
  let extraLines = 0;
  let writing: Promise<void> = Promise.resolve();
  const hand = async () => {
    const full = batch;
    batch = new Batch();
    await writing;
    writing = write(full);
    // Settled by the next hand-over or the end; a failure is seen there, never left unhandled.
    writing.catch(() => {});
  };
  try {
    for await (const [record, bytes, lines] of parser as AsyncIterable<Parsed>) {
      const row = checkRow(record, imp.plan);
      if (row.ok && batch.keys.has(row.key)) await hand(); // a repeated address goes to the next batch, after this one
      batch.total++;
      batch.bytes = baseBytes + bytes;
      extraLines += quotedCrlfs(record);
      batch.lines = baseLines + lines - extraLines;
      if (row.ok) {
        batch.keys.add(row.key);
        batch.rows.push({ id: newId('contact'), email: row.email, firstName: row.firstName, lastName: row.lastName, unsubscribed: row.unsubscribed, properties: JSON.stringify(row.properties) });
      } else {
        batch.failed++;
        if (errorsKept < MAX_ERRORS) { batch.errors.push({ line: batch.lines, reason: row.reason }); errorsKept++; }
      }
      if (batch.total >= batchRows) await hand();
    }
  } catch (err) {
    if (!(err instanceof CsvError)) {
      await writing.catch(() => {});
      throw err;
    }
    // The rows before a malformed record are kept; the import stops there, saying where.
    if (batch.total) await hand();
    await writing;
    const line = baseLines + ((err as CsvError & { lines?: number }).lines ?? 0) - extraLines;
    await finishImport(sql, projectId, importId, 'failed', `line ${line}: ${err.message.replace(/ at line \d+/, '')}`);
    return imp;
  }
  if (batch.total) await hand();
  await writing;
  await finishImport(sql, projectId, importId, 'completed');
  return imp;
}
