import { spawn } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { after } from 'node:test';
import { TEST_SECRET_KEY } from './app.ts';
import { scheduleAhead } from './scheduling.ts';
import { spawnEntry, type Spawned } from './process.ts';
import { testRedisUrl } from './redis.ts';

/**
 * The API as a real process, for measuring what a request costs it (§18.1, §22): `/healthz` probed
 * from a process of its own, and the API's RSS read from /proc.
 */
export async function spawnApi(databaseUrl: string, env: Record<string, string> = {}): Promise<{ api: Spawned; url: string }> {
  // Registered before the spawn, so it runs before the spawn helper's own SIGKILL: SIGTERM lets
  // the API stop in order, its connections closed.
  let api: Spawned | undefined;
  after(async () => {
    if (!api || api.child.exitCode !== null) return;
    api.child.kill('SIGTERM');
    await api.exited;
  });
  api = spawnEntry('src/api.ts', {
    DATABASE_URL: databaseUrl, REDIS_URL: (await testRedisUrl()) ?? 'redis://127.0.0.1:6379', SECRET_KEY: TEST_SECRET_KEY,
    PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env,
  });
  const { url } = (await api.logLine('api listening', 90_000)) as { url: string };
  return { api, url };
}

/** The API's RSS in MB: the largest process under the one spawned (should the API run children of its own). */
export function rssMb(rootPid: number): number {
  const tree = (pid: number): number[] => {
    let kids: number[] = [];
    try {
      kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    } catch { /* gone */ }
    return [pid, ...kids.flatMap(tree)];
  };
  let most = 0;
  for (const pid of tree(rootPid)) {
    try {
      const kb = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
      most = Math.max(most, kb / 1024);
    } catch { /* gone */ }
  }
  return most;
}

/**
 * Runs `work` while a process of its own probes `<url>/healthz` every 50 ms; answers the work's
 * result, the slowest probe in ms, and, given `pid`, the largest RSS of that process tree in MB.
 * The prober's own first probe (its start) is not counted.
 */
export async function whileProbing<T>(url: string, label: string, work: () => Promise<T>, opts: { pid?: number } = {}) {
  // The probes run in a process of their own, so this process's work (building and sending 20 MiB)
  // never counts as the API's. It probes until its stdin closes, then prints the worst.
  const prober = spawn(process.execPath, ['-e', `
    let worst = 0, probes = 0, done = false;
    process.stdin.on('end', () => { done = true; }).resume();
    (async () => {
      try { const r = await fetch(${JSON.stringify(url)} + '/healthz'); await r.arrayBuffer(); } catch {}
      console.log('ready');
      while (!done && probes < 20000) {
        const t = performance.now();
        try { const r = await fetch(${JSON.stringify(url)} + '/healthz', { signal: AbortSignal.timeout(60000) }); await r.arrayBuffer(); } catch {}
        worst = Math.max(worst, performance.now() - t); probes++;
        await new Promise((r) => setTimeout(r, 50));
      }
      console.log(JSON.stringify({ worst, probes }));
    })();`], { stdio: ['pipe', 'pipe', 'inherit'] });
  // The prober stands in for a health checker on another host: on a shared machine it is scheduled
  // first where allowed, so its probes time the API, not its own wait for a CPU.
  scheduleAhead([prober.pid!]);
  let out = '';
  prober.stdout!.on('data', (d) => { out += d; });
  const exited = new Promise((resolve) => prober.on('exit', resolve));
  let rss = opts.pid ? rssMb(opts.pid) : 0;
  const sampler = opts.pid ? setInterval(() => { rss = Math.max(rss, rssMb(opts.pid!)); }, 25) : undefined;
  for (let i = 0; i < 200 && !out.includes('ready'); i++) await new Promise((r) => setTimeout(r, 50));
  // This process's own event loop delay, beside the probes: tells a held loop (an in-process app)
  // from a busy machine.
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  // The API, spawned (`pid`) or served in this process, stands in for one on a host of its own: its
  // event loop (that thread only; Linux keeps a nice value per thread, and the MIME pool's threads
  // keep theirs) is scheduled before the other test files' processes, so a probe times this loop,
  // not the suite.
  const putBack = scheduleAhead([opts.pid ?? 0]);
  let result: T;
  try {
    result = await work();
    // A few probes after the work too: what it left behind (a parse, a collection) counts as well.
    await new Promise((r) => setTimeout(r, 300));
  } finally {
    putBack();
    delay.disable();
    clearInterval(sampler);
    prober.stdin!.end();
    await exited;
  }
  const { worst, probes } = JSON.parse(out.slice(out.indexOf('{'))) as { worst: number; probes: number };
  console.log(JSON.stringify({ request: label, worst_healthz_ms: Math.round(worst), ...(opts.pid ? { max_rss_mb: Math.round(rss) } : {}), probes, loop_delay_max_ms: Math.round(delay.max / 1e6) }));
  return { result, worst, rss, probes };
}

/**
 * Measures up to `attempts` times and answers the first measurement whose slowest probe is within
 * `budgetMs`, or the last. On a machine shared with other work an idle API's probes sometimes wait
 * longer than the budget too; a request that does block the event loop blocks it every time.
 */
export async function withinBudget<T>(attempts: number, budgetMs: number, measure: () => Promise<{ result: T; worst: number; rss: number; probes: number }>, rssBudgetMb = Infinity) {
  let m = await measure();
  // Memory is not the machine's noise: a measurement over the RSS budget is not retried.
  for (let i = 1; i < attempts && m.worst > budgetMs && m.rss < rssBudgetMb; i++) m = await measure();
  return m;
}
