import { Gauge } from 'prom-client';
import type { Sql } from '../platform/db.ts';
import { metricsSql, registry } from '../platform/metrics.ts';

/** Read at most this often, given up after a second, like the queue gauges (§16.7). */
const READ_EVERY_MS = 5000;
const READ_TIMEOUT_MS = 1000;

type Row = { projectId: string; window: string; sent: string; bounced: string; complained: string; paused: boolean };
let reading: { startedAt: number; sql: Sql; rows: Promise<Row[] | undefined> } | undefined;

/** Every project's own windows through mailroom_reputation(), the one reading the worker and the API use too. */
async function readOnce(sql: Sql): Promise<Row[] | undefined> {
  const query = sql<Row[]>`
    select p.id as project_id, r."window", r.sent, r.bounced, r.complained,
           exists (select 1 from project_reputation pr where pr.project_id = p.id and pr.paused_at is not null) as paused
    from projects p cross join lateral mailroom_reputation(p.id) r
    where r.scope = 'project'`;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      query,
      new Promise<never>((_, reject) => { timer = setTimeout(() => { query.cancel(); reject(new Error('timeout')); }, READ_TIMEOUT_MS); }),
    ]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

function rows(): Promise<Row[] | undefined> | undefined {
  const sql = metricsSql();
  if (!sql) return undefined;
  const now = performance.now();
  if (!reading || reading.sql !== sql || now - reading.startedAt >= READ_EVERY_MS) reading = { startedAt: now, sql, rows: readOnce(sql) };
  return reading.rows;
}

/** `mailroom_reputation_rate{project,kind,window}`: the project scope's hard-bounce and complaint rates. */
new Gauge({
  name: 'mailroom_reputation_rate',
  help: 'Hard bounces or complaints over sent recipients of the project, per window (1h, representative); read at most every 5 s.',
  labelNames: ['project', 'kind', 'window'] as const,
  registers: [registry],
  async collect() {
    const read = await rows();
    if (!read) return;
    this.reset();
    for (const r of read) {
      const sent = Number(r.sent);
      this.set({ project: r.projectId, kind: 'bounce', window: r.window }, sent > 0 ? Number(r.bounced) / sent : 0);
      this.set({ project: r.projectId, kind: 'complaint', window: r.window }, sent > 0 ? Number(r.complained) / sent : 0);
    }
  },
});

/** `mailroom_sending_paused{project}`: 1 while the project's mail is held. */
new Gauge({
  name: 'mailroom_sending_paused',
  help: '1 while the project is paused for its reputation or its SES account, else 0.',
  labelNames: ['project'] as const,
  registers: [registry],
  async collect() {
    const read = await rows();
    if (!read) return;
    this.reset();
    for (const r of read) this.set({ project: r.projectId }, r.paused ? 1 : 0);
  },
});
