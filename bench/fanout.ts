import { Pool } from 'undici';
import { loadConfig } from '../src/platform/config.ts';
import { createSql, plannedEachTime, type Sql } from '../src/platform/db.ts';
import { newId } from '../src/platform/ids.ts';
import { createProject } from '../src/projects/service.ts';
import { recordEvent } from '../src/events/record.ts';
import { createEndpoint } from '../src/webhooks/service.ts';
import { FLUSH_IN_FLIGHT } from '../src/webhooks/flush.task.ts';
import { cpuDuring, QUICK, ratio, round, spawnMailroom, waitFinished, withWorker, type BenchContext, type BenchResult } from './support.ts';

/**
 * Webhook deliveries per second from one worker process (default concurrency) to a local HTTP
 * receiver, against a bare undici POST loop to the same receiver with as many requests in flight
 * as a flush keeps to one endpoint. Development mode lets the endpoint be http on loopback. The
 * clock starts when the batch of events commits and stops when the last delivery is `delivered`.
 */
const CONCURRENCY = FLUSH_IN_FLIGHT;
const EVENTS = QUICK ? 300 : 3000;
const WARMUP = QUICK ? 50 : 200;
/** The bare loop is fast, so it runs longer than the worker's batch for a steadier figure. */
const CEILING_REQUESTS = EVENTS * 5;

const DATA = { to: ['reader@example.com'], smtp_response: '250 2.0.0 OK' };

/** One email each, as the send task would leave them, then one event each in a single transaction. */
async function recordEvents(sql: Sql, projectId: string, count: number) {
  await sql.begin(async (tx) => {
    await Promise.all(Array.from({ length: count }, async () => {
      const emailId = newId('email');
      await tx`insert into emails (id, project_id, status, from_address, to_addresses, subject, text)
               values (${emailId}, ${projectId}, 'sent', 'bench@example.com', ${['reader@example.com']}, 'Your receipt', 'Thanks')`;
      await recordEvent(tx, { projectId, emailId, type: 'email.delivered', data: DATA });
    }));
  });
}

/** Waits until `expect` deliveries of the project are `delivered`; any failure aborts the bench. */
async function waitDelivered(sql: Sql, projectId: string, expect: number) {
  await waitFinished(`${expect} webhook deliveries`, async () => {
    const [row] = await plannedEachTime<[{ busy: boolean }]>(sql,
      `select exists (select 1 from webhook_deliveries where status = 'pending' and project_id = $1) as busy`, [projectId]);
    return row.busy;
  }, async () => {
    const [row] = await sql<[{ delivered: number; failed: number; error: string | null }]>`
      select count(*) filter (where status = 'delivered')::int as delivered,
             count(*) filter (where status = 'failed' or attempt_count > 0 and status = 'pending')::int as failed,
             max(error) as error
      from webhook_deliveries where project_id = ${projectId}`;
    if (row.failed) throw new Error(`${row.failed} deliveries did not succeed first time (${row.error})`);
    return row.delivered >= expect;
  });
}

/** The same number of POSTs with an event-sized JSON body, CONCURRENCY at a time, kept alive. */
async function bareLoop(url: string, count: number): Promise<number> {
  const pool = new Pool(url, { connections: CONCURRENCY });
  const body = JSON.stringify({ id: newId('event'), type: 'email.delivered', created_at: new Date().toISOString(), data: { email_id: newId('email'), ...DATA } });
  const headers = { 'content-type': 'application/json', 'user-agent': 'bench' };
  let next = 0;
  try {
    const started = performance.now();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        next++;
        const res = await pool.request({ method: 'POST', path: '/hook', headers, body });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(`receiver answered ${res.statusCode}`);
      }
    }));
    return (performance.now() - started) / 1000;
  } finally {
    await pool.close();
  }
}

export async function fanout(ctx: BenchContext): Promise<BenchResult> {
  const env = { ...ctx.env, NODE_ENV: 'development', SINK_SMTP_PORT: '0' };
  const config = loadConfig(env, { requireRedis: false });
  const sql = createSql(ctx.databaseUrl, { max: 2 });
  const receiver = spawnMailroom('bench/receiver.ts', {});
  try {
    const { port } = await receiver.logLine('receiver listening');
    const url = `http://127.0.0.1:${port}`;
    const project = await createProject(sql, 'bench fanout');
    await createEndpoint(sql, config, project.id, `${url}/hook`);

    const { seconds, cpu } = await withWorker(env, async (pid) => {
      await recordEvents(sql, project.id, WARMUP);
      await waitDelivered(sql, project.id, WARMUP);
      // The clock and the CPU counters start once the events have committed.
      await recordEvents(sql, project.id, EVENTS);
      return cpuDuring({ worker: pid, receiver: receiver.pid }, () => waitDelivered(sql, project.id, WARMUP + EVENTS));
    });

    await bareLoop(url, WARMUP);
    const ceiling = CEILING_REQUESTS / (await bareLoop(url, CEILING_REQUESTS));
    const rate = EVENTS / seconds;
    return {
      bench: 'fanout',
      rate_per_s: round(rate),
      ceiling: 'bare undici POST loop',
      ceiling_per_s: round(ceiling),
      ratio: ratio(rate, ceiling),
      deliveries: EVENTS,
      ceiling_requests: CEILING_REQUESTS,
      concurrency: CONCURRENCY,
      cpu_s: cpu,
    };
  } finally {
    await receiver.stop();
    await sql.end();
  }
}
