import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { newId } from '../src/platform/ids.ts';
import { signTrackingToken } from '../src/tracking/token.ts';
import { wrk, wrkBinary, type WrkRun } from './accept.ts';
import { apiWithKey, peakRssMb, QUICK, ratio, round, SECRET_KEY, sleep, type BenchContext, type BenchResult } from './support.ts';

/**
 * GET /t/c/<token> at 32 connections against the API with recording on: each click answers 302
 * and is then recorded (an event, the email's clicked_at) through the tracking group commit. The
 * ceiling is accept's rate (POST /v1/emails) on the same API process in the same run: a burst of
 * clicks should cost what a burst of sends does. Goals: at least 0.8 of it, p99 at most 25 ms.
 * The bench fails unless every click answered was recorded.
 */
const CONCURRENCY = 32;
const P99_GOAL_MS = 25;
const RATE_GOAL = 0.8;
const SECONDS = QUICK ? 2 : 4;
const WARMUP_SECONDS = 1;
const LINKS = ['https://shop.example/orders/42', 'https://shop.example/help'];
/**
 * The clicks go round this many emails: an email records at most 100 clicks
 * (RECORDED_HITS_PER_EMAIL), and the fastest day's run (about 43,000 clicks with the warm-up)
 * leaves each well under that.
 */
const EMAILS = 1000;

/** wrk GETs each of `paths` in turn on `url`'s host. */
async function wrkGet(url: string, paths: string[], seconds: number): Promise<WrkRun> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-bench-'));
  try {
    const script = path.join(dir, 'track.lua');
    await writeFile(script, `
wrk.headers["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/120.0"
local paths = { ${paths.map((p) => `"${p}"`).join(', ')} }
local n = 0
function request()
  n = n + 1
  return wrk.format("GET", paths[(n % #paths) + 1])
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests":%d,"duration_us":%d,"failed":%d,"p50_us":%d,"p99_us":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout + e.status,
    latency:percentile(50), latency:percentile(99)))
end
`);
    const { stdout, stderr } = await promisify(execFile)('bash', ['-c', '"$@"; times', 'bash', wrkBinary(), '-t1', `-c${CONCURRENCY}`, `-d${seconds}s`, '--timeout', '10s',
      '-s', script, url], { maxBuffer: 1 << 20 });
    const line = /^WRK (.*)$/m.exec(stdout)?.[1];
    if (!line) throw new Error(`wrk printed no summary:\n${stdout}${stderr}`);
    const out = JSON.parse(line) as { requests: number; duration_us: number; failed: number; p50_us: number; p99_us: number };
    // wrk counts 3xx as answered: a 302 is the route's success. Any 4xx/5xx is a failure.
    if (out.failed) throw new Error(`${out.failed} of wrk's requests failed or were answered 4xx/5xx:\n${stdout}`);
    const children = stdout.trim().split('\n').at(-1)!.split(/\s+/).map((t) => {
      const m = /^(\d+)m([\d.]+)s$/.exec(t);
      return m ? Number(m[1]) * 60 + Number(m[2]) : NaN;
    });
    return { requests: out.requests, seconds: out.duration_us / 1e6, p50Ms: out.p50_us / 1000, p99Ms: out.p99_us / 1000, cpuSeconds: round(children[0]! + children[1]!, 2) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function track(ctx: BenchContext): Promise<BenchResult> {
  const { sql, projectId, key, api } = await apiWithKey(ctx, 'bench track');
  try {
    // Emails as the worker leaves them after a tracked send: their links stored by position.
    const emailIds = Array.from({ length: EMAILS }, () => newId('email'));
    await sql`
      insert into emails (id, project_id, status, from_address, to_addresses, subject, html, text, tracked_links, sent_at)
      select id, ${projectId}, 'sent', 'shop@shop.example', ${['reader@example.com']}::text[], 'Receipt',
        ${LINKS.map((l) => `<a href="${l}">x</a>`).join('')}, 'x', ${LINKS}::text[], now()
      from unnest(${emailIds}::text[]) as id`;
    const paths = emailIds.map((emailId, i) => `/t/c/${signTrackingToken(SECRET_KEY, 'click', { projectId, emailId, link: i % LINKS.length }, '127.0.0.1')}`);
    let run: WrkRun;
    let answered: number;
    let accept: WrkRun;
    let rss: number;
    try {
      const { url } = await api.logLine('api listening');
      const probe = await fetch(new URL(paths[0]!, String(url)), { redirect: 'manual' });
      if (probe.status !== 302 || probe.headers.get('location') !== LINKS[0]) throw new Error(`the click route answered ${probe.status} ${probe.headers.get('location')}`);
      const warmup = await wrkGet(String(url), paths, WARMUP_SECONDS);
      run = await wrkGet(String(url), paths, SECONDS);
      answered = 1 + warmup.requests + run.requests;
      rss = peakRssMb(api.pid);
      // The ceiling: accept on the same process, once the clicks are recorded.
      await sleep(500);
      await wrk(String(url), key, WARMUP_SECONDS);
      accept = await wrk(String(url), key, SECONDS);
    } finally {
      await api.stop();
    }
    // Every answered click is recorded (the API records what it answered before it stops).
    const [{ n }] = await sql<[{ n: number }]>`
      select count(*)::int as n from events where project_id = ${projectId} and type = 'email.clicked'`;
    // More can be recorded: requests in flight when wrk stops are answered but not counted by it.
    if (n < answered) throw new Error(`${answered} clicks answered, ${n} recorded`);
    const rate = run.requests / run.seconds;
    const acceptRate = accept.requests / accept.seconds;
    return {
      bench: 'track',
      rate_per_s: round(rate),
      ceiling: 'accept (POST /v1/emails) on the same API process',
      ceiling_per_s: round(acceptRate),
      ratio: ratio(rate, acceptRate),
      rate_goal: `>= ${RATE_GOAL} of accept`,
      ceiling_p99_ms: round(accept.p99Ms, 2),
      p50_ms: round(run.p50Ms, 2),
      p99_ms: round(run.p99Ms, 2),
      p99_goal_ms: P99_GOAL_MS,
      api_peak_rss_mb: rss,
      clicks_recorded: n,
      requests: run.requests,
      concurrency: CONCURRENCY,
      load: `wrk, 1 thread, ${CONCURRENCY} connections, ${SECONDS} s after ${WARMUP_SECONDS} s of warm-up, round ${EMAILS} emails' links`,
    };
  } finally {
    await sql.end();
  }
}
