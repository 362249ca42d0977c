import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { ApiError, ValidationError } from '../../http/errors.ts';
import type { Sql } from '../../platform/db.ts';
import { ServiceError } from '../../platform/errors.ts';
import { requireProject } from '../../projects/service.ts';
import type { Command } from '../../commands.ts';
import { createImport } from './service.ts';
import { getImport, type ImportRow } from './queries.ts';
import { toImportResponse } from './schemas.ts';

/** How often the CLI reads the import's row while following it. */
const POLL_MS = 250;

type Values = Record<string, string | boolean | undefined>;
const opt = (v: Values, name: string) => (typeof v[name] === 'string' ? v[name] as string : undefined);

/** A 422 or 413 of the service as the CLI's one-line error. */
async function asCli<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ValidationError) throw new ServiceError('invalid_input', err.detail.map((d) => `${d.loc.filter((p) => p !== 'body').join('.') || 'body'}: ${d.msg}`).join('; '));
    if (err instanceof ApiError) throw new ServiceError('invalid_input', err.message);
    throw err;
  }
}

const megabytes = (n: number) => (n / 1024 / 1024).toFixed(1);

/** One line of the terminal's progress bar: by bytes, since the row count is known only at the end. */
function bar(r: ImportRow): string {
  const share = r.bytesTotal ? Math.min(1, r.bytesDone / r.bytesTotal) : 0;
  const filled = Math.round(share * 30);
  return `\r[${'#'.repeat(filled)}${'-'.repeat(30 - filled)}] ${Math.floor(share * 100)}% ${r.total} rows ` +
    `(${r.created} created, ${r.updated} updated, ${r.skipped} skipped, ${r.failed} failed) ${megabytes(r.bytesDone)}/${megabytes(r.bytesTotal)} MB`;
}

/**
 * Reads the import's row until it ends: a progress bar on a terminal, else one JSON line per
 * change. Answers the finished import; a failed one is the CLI's error.
 */
async function follow(sql: Sql, projectId: string, id: string, out: NodeJS.WriteStream = process.stdout) {
  let last = '';
  for (;;) {
    const row = (await getImport(sql, projectId, id))!;
    const done = row.status === 'completed' || row.status === 'failed';
    const line = JSON.stringify({ id: row.id, status: row.status, counts: toImportResponse(row).counts, progress: { bytes_done: row.bytesDone, bytes_total: row.bytesTotal } });
    if (line !== last) {
      if (out.isTTY) out.write(bar(row) + (done ? '\n' : ''));
      else if (!done) out.write(`${line}\n`);
      last = line;
    }
    if (row.status === 'failed') throw new ServiceError('invalid_input', `import ${row.id} failed: ${row.failureReason ?? 'unknown reason'}`);
    if (done) return toImportResponse(row);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

/** The operator CLI's `contacts import`; the service function is the API's. */
export const CONTACT_IMPORT_COMMANDS: Record<string, Command> = {
  'contacts import': {
    usage: 'contacts import FILE --project ID [--segment ID] [--on-conflict upsert|skip] [--column-map JSON]',
    options: { project: { type: 'string' }, segment: { type: 'string' }, 'on-conflict': { type: 'string' }, 'column-map': { type: 'string' } },
    async run(ctx, v, args) {
      const path = args[0];
      const projectId = opt(v, 'project');
      if (!path || !projectId) throw new ServiceError('invalid_input', `FILE and --project are required: ${this.usage}`);
      try {
        if (!(await stat(path)).isFile()) throw new Error('not a file');
      } catch (err) {
        throw new ServiceError('invalid_input', `cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
      }
      const sql = ctx.sql();
      await requireProject(sql, projectId);
      const segment = opt(v, 'segment');
      const created = await asCli(() => createImport(sql, projectId, {
        file: createReadStream(path, { highWaterMark: 256 * 1024 }),
        fields: { segments: segment ? JSON.stringify([segment]) : undefined, on_conflict: opt(v, 'on-conflict'), column_map: opt(v, 'column-map') },
      }, ctx.config.contactImportMaxBytes));
      return follow(sql, projectId, created.id);
    },
  },
};
