import { createReadStream, createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createSql } from '../src/platform/db.ts';
import { createProject } from '../src/projects/service.ts';
import { newId } from '../src/platform/ids.ts';
import { createImport } from '../src/contacts/imports/service.ts';
import { peakRssMb, QUICK, ratio, round, waitUntil, withWorker, type BenchContext, type BenchResult } from './support.ts';

/**
 * A million-row CSV (email, first and last name, a declared string property) imported by one
 * worker process, from `started_at` to `completed_at` of the import's row, against PostgreSQL
 * `COPY` of the same file into a bare table of four text columns in the same database. The
 * worker's peak RSS is read from /proc.
 */
const ROWS = QUICK ? 100_000 : 1_000_000;

async function writeCsv(file: string, rows: number) {
  const out = createWriteStream(file);
  out.write('email,first_name,last_name,properties.plan\n');
  const lines: string[] = [];
  for (let i = 0; i < rows; i++) {
    lines.push(`person${i}@example.com,First${i},Last${i},${i % 3 ? 'pro' : 'free'}\n`);
    if (lines.length === 10_000 || i === rows - 1) {
      if (!out.write(lines.join(''))) await once(out, 'drain');
      lines.length = 0;
    }
  }
  out.end();
  await once(out, 'finish');
}

export async function contactsImport(ctx: BenchContext): Promise<BenchResult> {
  const file = path.join(tmpdir(), `mailroom-bench-contacts-${process.pid}.csv`);
  const sql = createSql(ctx.databaseUrl, { max: 2 });
  try {
    await writeCsv(file, ROWS);

    // The ceiling: the same bytes through COPY into a table with no index, key or check.
    await sql`create table bench_bare_contacts (email text, first_name text, last_name text, plan text)`;
    const copyStarted = performance.now();
    await pipeline(createReadStream(file), await sql`copy bench_bare_contacts from stdin with (format csv, header true)`.writable());
    const copySeconds = (performance.now() - copyStarted) / 1000;
    const [copied] = await sql<[{ n: number }]>`select count(*)::int as n from bench_bare_contacts`;
    if (copied.n !== ROWS) throw new Error(`COPY loaded ${copied.n} rows, not ${ROWS}`);
    await sql`drop table bench_bare_contacts`;

    const project = await createProject(sql, 'bench contacts import');
    await sql`insert into contact_properties (id, project_id, key, type) values (${newId('contactProperty')}, ${project.id}, 'plan', 'string')`;
    const uploadStarted = performance.now();
    const { id } = await createImport(sql, project.id, { file: createReadStream(file, { highWaterMark: 256 * 1024 }), fields: {} }, Number.MAX_SAFE_INTEGER);
    const uploadSeconds = (performance.now() - uploadStarted) / 1000;

    const run = await withWorker({ ...ctx.env, SINK_SMTP_PORT: '0', METRICS_PORT: '0' }, async (pid) => {
      await waitUntil(`${ROWS} contacts imported`, async () => {
        const [row] = await sql<[{ status: string; failureReason: string | null }]>`select status, failure_reason from contact_imports where id = ${id}`;
        if (row.status === 'failed') throw new Error(`the import failed: ${row.failureReason}`);
        return row.status === 'completed';
      }, 3_600_000, 500);
      return { peak: peakRssMb(pid) };
    });
    const [row] = await sql<[{ seconds: number; total: number; created: number; contacts: number }]>`
      select extract(epoch from completed_at - started_at)::float8 as seconds, total, created,
        (select count(*)::int from contacts where project_id = ${project.id}) as contacts
      from contact_imports where id = ${id}`;
    if (row.total !== ROWS || row.created !== ROWS || row.contacts !== ROWS) throw new Error(`imported ${JSON.stringify(row)}, not ${ROWS} rows`);
    const rate = ROWS / row.seconds;
    const ceiling = ROWS / copySeconds;
    return {
      bench: 'contacts-import',
      rows: ROWS,
      rate_per_s: round(rate),
      ceiling: 'COPY of the same CSV into a bare table',
      ratio: ratio(rate, ceiling),
      worker_peak_rss_mb: run.peak,
      ceiling_rate_per_s: round(ceiling),
      import_s: round(row.seconds),
      upload_s: round(uploadSeconds),
    };
  } finally {
    await sql.end();
    await rm(file, { force: true });
  }
}
