import { finished } from 'node:stream/promises';
import { Parser, CsvError, type InfoRecord } from 'csv-parse';
import type { Sql } from '../../platform/db.ts';
import { newId } from '../../platform/ids.ts';
import { CSV_OPTIONS, quotedCrlfs } from './service.ts';
import { checkRow, FIXED_COLUMNS, type RowValues } from './rows.ts';
import { advanceImport, chunkAt, finishImport, mergeBatch, startImport, type ImportError, type ImportRow, type MergePlan } from './queries.ts';

/**
 * Rows per transaction. A batch costs PostgreSQL a few milliseconds beside its rows (the
 * statement's planning, the commit), and counts are shown a batch at a time.
 */
export const BATCH_ROWS = 10_000;
/** How many `{line, reason}` an import keeps. */
export const MAX_ERRORS = 100;

/** How much of a stored piece the parser is given at once. */
const SLICE_BYTES = 64 * 1024;

/**
 * The stored upload from `offset` on, in slices. The next piece is read while this one is
 * parsed, so the worker holds two stored pieces at most.
 */
async function* uploadFrom(sql: Sql, projectId: string, importId: string, offset: number): AsyncGenerator<Buffer> {
  let chunk = await chunkAt(sql, projectId, importId, { offset });
  let from = chunk ? offset - chunk.startByte : 0;
  while (chunk) {
    const next = chunkAt(sql, projectId, importId, { after: chunk.seq });
    next.catch(() => {}); // awaited below; seen there if the loop gets that far
    for (let i = from; i < chunk.data.length; i += SLICE_BYTES) yield chunk.data.subarray(i, i + SLICE_BYTES);
    from = 0;
    chunk = await next;
  }
}

/** A batch of rows: the valid ones as columns (rows.ts `RowValues`), the others counted. */
class Batch {
  readonly ids: string[] = [];
  readonly columns: string[][];
  /** The valid rows' lower-cased addresses: a batch holds an address once. */
  readonly keys = new Set<string>();
  readonly errors: ImportError[] = [];
  total = 0;
  failed = 0;
  /** The cursor after the batch's last record. */
  bytes = 0;
  lines = 0;

  constructor(width: number) {
    this.columns = Array.from({ length: width }, () => []);
  }

  add(key: string, values: RowValues) {
    this.ids.push(newId('contact'));
    this.keys.add(key);
    for (let i = 0; i < values.length; i++) this.columns[i]!.push(values[i]!);
  }
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
  const plan: MergePlan = { onConflict: imp.onConflict, segmentIds: imp.segmentIds, topics: imp.topics, properties: imp.plan.properties };
  const width = FIXED_COLUMNS + imp.plan.properties.length;
  let errorsKept = imp.errors.length;
  let cursorBytes = imp.bytesDone;

  const write = async (batch: Batch) => {
    await sql.begin(async (tx) => {
      // Not waiting for the commit to reach the disk is safe here: a crash that loses it loses
      // the cursor's move in the same commit, and the next run does the batch again.
      await tx`set local synchronous_commit = off`;
      const { created, updated } = batch.ids.length ? await mergeBatch(tx, projectId, plan, batch.ids, batch.columns) : { created: 0, updated: 0 };
      const moved = await advanceImport(tx, projectId, importId, {
        fromBytes: cursorBytes, bytes: batch.bytes, lines: batch.lines, total: batch.total, created, updated,
        skipped: batch.ids.length - created - updated, failed: batch.failed, errors: batch.errors,
      });
      if (!moved) throw new LostImport(`import ${importId} was moved on by another run`);
    });
    cursorBytes = batch.bytes;
  };

  // Each record is checked as the parser reaches it (on_record, answering null so nothing is
  // queued behind it) and lands in the open batch; a full batch waits in `full` for the writer.
  let batch = new Batch(width);
  const full: Batch[] = [];
  const values: RowValues = new Array<string>(width);
  let extraLines = 0;
  const take = (record: string[], info: InfoRecord) => {
    extraLines += quotedCrlfs(record);
    const line = baseLines + info.lines - extraLines;
    const reason = checkRow(record, imp.plan, values);
    if (reason === undefined) {
      const key = values[0]!.toLowerCase();
      if (batch.keys.has(key)) { full.push(batch); batch = new Batch(width); } // a repeated address goes to the next batch, after this one
      batch.add(key, values);
    } else {
      batch.failed++;
      if (errorsKept < MAX_ERRORS) { batch.errors.push({ line, reason }); errorsKept++; }
    }
    batch.total++;
    batch.bytes = baseBytes + info.bytes;
    batch.lines = line;
    if (batch.total >= batchRows) { full.push(batch); batch = new Batch(width); }
    return null;
  };
  const { info: _info, ...options } = CSV_OPTIONS;
  const parser = new Parser({ ...options, bom: baseBytes === 0, on_record: take });
  parser.on('error', () => {}); // read from `errored` below, or thrown by `finished`
  parser.resume();

  let writing: Promise<void> = Promise.resolve();
  // Starts the full batches' writes one after another, each once the one before has committed.
  const hand = async () => {
    while (full.length) {
      const next = full.shift()!;
      await writing;
      writing = write(next);
      // Settled by the next hand-over or the end; a failure is seen there, never left unhandled.
      writing.catch(() => {});
    }
  };
  try {
    for await (const slice of uploadFrom(sql, projectId, importId, baseBytes)) {
      parser.write(slice); // parses the slice there and then
      if (parser.errored) throw parser.errored;
      await hand();
    }
    parser.end();
    await finished(parser);
  } catch (err) {
    if (!(err instanceof CsvError)) {
      await writing.catch(() => {});
      throw err;
    }
    // The rows before a malformed record are kept; the import stops there, saying where.
    if (batch.total) full.push(batch);
    await hand();
    await writing;
    const line = baseLines + ((err as CsvError & { lines?: number }).lines ?? 0) - extraLines;
    await finishImport(sql, projectId, importId, 'failed', `line ${line}: ${err.message.replace(/ at line \d+/, '')}`);
    return imp;
  }
  if (batch.total) full.push(batch);
  await hand();
  await writing;
  await finishImport(sql, projectId, importId, 'completed');
  return imp;
}
