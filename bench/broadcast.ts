import { createSql, type Sql } from '../src/platform/db.ts';
import { newId } from '../src/platform/ids.ts';
import { apiWithKey, QUICK, round, sleep, waitUntil, withWorker, type BenchContext, type BenchResult } from './support.ts';

/**
 * A broadcast to RECIPIENTS contacts drained by one worker process through the built-in sink,
 * with transactional sends accepted by the API meanwhile. Figures: how soon the first copy left
 * after `send` (start_ms), the broadcast's rate against the drain bench's rate in the same run
 * (drain_ratio), and the p99 from accept to sent of transactional mail without and during the
 * broadcast (both on the database's clock: created_at to sent_at).
 */
const RECIPIENTS = Number(process.env.BENCH_BROADCAST_RECIPIENTS ?? (QUICK ? 5000 : 100_000));
const CONCURRENCY = 8;
/** Transactional sends a second, and for how long, in each of the two measurements. */
const TX_PER_S = 10;
const TX_SECONDS = QUICK ? 5 : 15;

async function seed(sql: Sql, projectId: string) {
  const segmentId = newId('segment');
  await sql`insert into segments (id, project_id, name) values (${segmentId}, ${projectId}, 'bench')`;
  // In chunks, ids made here so contact id order is insertion order.
  for (let done = 0; done < RECIPIENTS; done += 10_000) {
    const ids = Array.from({ length: Math.min(10_000, RECIPIENTS - done) }, () => newId('contact'));
    await sql`insert into contacts (id, project_id, email, first_name)
      select id, ${projectId}, 'reader' || (${done}::int + i) || '@example.com', 'Reader' from unnest(${ids}::text[]) with ordinality t(id, i)`;
    await sql`insert into contact_segments (segment_id, contact_id, project_id) select ${segmentId}, id, ${projectId} from unnest(${ids}::text[]) id`;
  }
  return segmentId;
}

/** TX_PER_S transactional sends a second for TX_SECONDS; their accept-to-sent p99 once all are sent. */
async function transactional(sql: Sql, url: string, key: string, projectId: string, tag: string): Promise<number> {
  const ids: string[] = [];
  const started = performance.now();
  for (let i = 0; i < TX_PER_S * TX_SECONDS; i++) {
    const wait = started + (i * 1000) / TX_PER_S - performance.now();
    if (wait > 0) await sleep(wait);
    const res = await fetch(`${url}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'Bench <bench@example.com>', to: 'reset@example.com', subject: 'Reset your password', text: 'Your code is 123456.', tags: [{ name: 'run', value: tag }] }),
    });
    if (res.status !== 201) throw new Error(`accept answered ${res.status}: ${await res.text()}`);
    ids.push(((await res.json()) as { id: string }).id);
  }
  await waitUntil(`${ids.length} transactional emails sent`, async () => {
    const [row] = await sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${projectId} and id = any(${ids}) and status = 'sent'`;
    return row.n === ids.length;
  }, 600_000, 200);
  const [row] = await sql<[{ p99: number }]>`
    select percentile_cont(0.99) within group (order by extract(epoch from sent_at - created_at) * 1000) as p99
    from emails where project_id = ${projectId} and id = any(${ids})`;
  return round(row.p99);
}

export async function broadcast(ctx: BenchContext): Promise<BenchResult> {
  const { sql, projectId, key, api } = await apiWithKey(ctx, 'bench broadcast', { PUBLIC_BASE_URL: 'https://mail.example.com' });
  const db = createSql(ctx.databaseUrl, { max: 2 });
  try {
    const { url } = await api.logLine('api listening');
    const segmentId = await seed(sql, projectId);
    const env = { ...ctx.env, SINK_SMTP_PORT: '0', METRICS_PORT: '0', WORKER_CONCURRENCY: String(CONCURRENCY), PUBLIC_BASE_URL: 'https://mail.example.com' };
    return await withWorker(env, async () => {
      const alone = await transactional(db, String(url), key, projectId, 'alone');
      const created = await fetch(`${url}/v1/broadcasts`, {
        method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ segment_id: segmentId, from: 'News <news@example.com>', subject: 'Hello {{{FIRST_NAME|there}}}', html: `<p>Hi {{{FIRST_NAME|there}}}. ${'News of the month. '.repeat(20)}</p>`, text: 'Hi {{{FIRST_NAME|there}}}.' }),
      });
      const { id } = (await created.json()) as { id: string };
      const sendAt = Date.now();
      const sent = await fetch(`${url}/v1/broadcasts/${id}/send`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{}' });
      if (sent.status !== 200) throw new Error(`send answered ${sent.status}: ${await sent.text()}`);
      await waitUntil('the first copy sent', async () => (await db`select 1 from emails where broadcast_id = ${id} and status = 'sent' limit 1`).length > 0, 120_000, 20);
      const startMs = Date.now() - sendAt;
      // Measured once the broadcast is under way, so its whole window is queued ahead.
      await sleep(2000);
      const during = await transactional(db, String(url), key, projectId, 'during');
      await waitUntil('the broadcast sent', async () => (await db<[{ status: string }]>`select status from broadcasts where id = ${id}`)[0].status === 'sent', 3_600_000, 500);
      const [span] = await db<[{ s: number; n: number }]>`
        select extract(epoch from max(sent_at) - min(sent_at))::float8 as s, count(*)::int as n from emails where broadcast_id = ${id} and status = 'sent'`;
      if (span.n !== RECIPIENTS) throw new Error(`${span.n} copies sent, expected ${RECIPIENTS}`);
      const rate = round(RECIPIENTS / span.s);
      const drainRate = ctx.earlier?.drain?.rate_per_s;
      return {
        bench: 'broadcast',
        recipients: RECIPIENTS,
        start_ms: startMs,
        rate_per_s: rate,
        drain_ratio: typeof drainRate === 'number' ? round(rate / drainRate, 3) : null,
        transactional_p99_ms_alone: alone,
        transactional_p99_ms_during: during,
        provider: 'sink',
        concurrency: CONCURRENCY,
      };
    });
  } finally {
    await api.stop();
    await db.end();
    await sql.end();
  }
}
