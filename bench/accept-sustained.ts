import { Pool } from 'undici';
import { apiWithKey, cpuSeconds, peakRssMb, postgresCpuSeconds, QUICK, round, rssMb, type BenchContext, type BenchResult } from './support.ts';

/**
 * POST /v1/emails at 32 connections for 2 minutes on a fresh database with no worker, so the
 * backlog only grows: does accepting slow down as the tables do? Compares the first 10 s with the
 * last 10 s. Every 10 s window also reports the CPU milliseconds per accepted email of the API and
 * of PostgreSQL, so a decay shows which side slowed down.
 */
const CONCURRENCY = 32;
const SECONDS = QUICK ? 20 : 120;
const WINDOW = 10;

const BODY = JSON.stringify({
  from: 'Bench <bench@example.com>',
  to: ['reader@example.com'],
  subject: 'Your receipt',
  text: 'Thanks for your order. '.repeat(20),
  html: `<p>${'Thanks for your order. '.repeat(20)}</p>`,
});

export async function acceptSustained(ctx: BenchContext): Promise<BenchResult> {
  const { sql, projectId, key, api } = await apiWithKey(ctx, 'bench accept-sustained');
  try {
    try {
      const { url } = await api.logLine('api listening');
      const bootRss = rssMb(api.pid);
      const pool = new Pool(String(url), { connections: CONCURRENCY, pipelining: 1 });
      const done: number[] = [];
      let failures = 0;
      const started = performance.now();
      const until = started + SECONDS * 1000;
      const windows: Array<{ per_s: number; api_cpu_ms: number; postgres_cpu_ms: number }> = [];
      let mark = { done: 0, api: cpuSeconds(api.pid), postgres: postgresCpuSeconds() };
      const closeWindow = () => {
        const now = { done: done.length, api: cpuSeconds(api.pid), postgres: postgresCpuSeconds() };
        const count = Math.max(1, now.done - mark.done);
        windows.push({
          per_s: round((now.done - mark.done) / WINDOW),
          api_cpu_ms: round(((now.api - mark.api) * 1000) / count, 3),
          postgres_cpu_ms: round(((now.postgres - mark.postgres) * 1000) / count, 3),
        });
        mark = now;
      };
      const sampler = setInterval(() => { if (windows.length < SECONDS / WINDOW - 1) closeWindow(); }, WINDOW * 1000);
      try {
        await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
          while (performance.now() < until) {
            const res = await pool.request({
              method: 'POST', path: '/v1/emails', body: BODY,
              headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
            });
            await res.body.dump();
            if (res.statusCode === 201) done.push(performance.now() - started);
            else failures++;
          }
        }));
        closeWindow();
      } finally {
        clearInterval(sampler);
        await pool.close();
      }
      if (failures) throw new Error(`${failures} requests answered other than 201`);
      const rateBetween = (from: number, to: number) => done.filter((t) => t >= from * 1000 && t < to * 1000).length / (to - from);
      const first = rateBetween(0, WINDOW);
      const last = rateBetween(SECONDS - WINDOW, SECONDS);
      const [{ backlog }] = await sql<[{ backlog: number }]>`select count(*)::int as backlog from emails where project_id = ${projectId}`;
      return {
        bench: 'accept-sustained',
        seconds: SECONDS,
        first_10s_per_s: round(first),
        last_10s_per_s: round(last),
        last_over_first: round(last / first, 3),
        overall_per_s: round(done.length / SECONDS),
        backlog_emails: backlog,
        windows,
        api_rss_after_boot_mb: bootRss,
        api_peak_rss_mb: peakRssMb(api.pid),
        concurrency: CONCURRENCY,
      };
    } finally {
      await api.stop();
    }
  } finally {
    await sql.end();
  }
}
