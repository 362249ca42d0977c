import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import postgres from 'postgres';
// @ts-expect-error: the parser ships no types
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { applyViews, migrateDatabase } from '../src/platform/migrate.ts';
import { createSql } from '../src/platform/db.ts';
import { createProject } from '../src/projects/service.ts';
import { createApiKey } from '../src/keys/service.ts';

export const ROOT = path.resolve(import.meta.dirname, '..');
/** BENCH_QUICK=1 shrinks every count, for a smoke run of the harness itself. */
export const QUICK = process.env.BENCH_QUICK === '1';
export const SECRET_KEY = 'bench-secret-key-0123456789abcdefghijklmnopqrstuvwxyz';

export type BenchContext = {
  databaseUrl: string;
  redisUrl: string;
  /** Environment every Mailroom child process gets (database, Redis, secret, logging). */
  env: Record<string, string>;
  /** The results of the benchmarks run before this one in the same run, by name (a ratio against another's figure). */
  earlier?: Record<string, BenchResult>;
};
export type BenchResult = Record<string, unknown>;

/**
 * A Debian tool a benchmark needs is not installed. `npm run bench` reports it with the package to
 * install and goes on with the other benchmarks; it is not a failure of the code measured.
 */
export class MissingTool extends Error {
  constructor(readonly tool: string, readonly debianPackage: string) {
    super(`${tool} not found: install the Debian package ${debianPackage} (apt-get install ${debianPackage})`);
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
export const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits;
export const ratio = (rate: number, ceiling: number | null) => (ceiling ? round(rate / ceiling, 3) : null);

/** Children still running; killed on any exit path so a failed run leaves nothing behind. */
const children = new Set<ChildProcess>();
export function killChildren() {
  for (const child of children) child.kill('SIGKILL');
}
process.on('exit', killChildren);

export type Service = {
  pid: number;
  /** The first JSON log line whose `msg` is `msg` (one already printed counts). */
  logLine(msg: string, timeoutMs?: number): Promise<Record<string, unknown>>;
  output(): string;
  stop(): Promise<void>;
  exited: Promise<number | null>;
};

/** Spawns a program directly (never through a wrapper), so `pid` is the process doing the work. */
export function spawnService(command: string, args: string[], env: Record<string, string> = {}): Service {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: `${ROOT}/node_modules/.bin:${process.env.PATH}`, HOME: process.env.HOME ?? '/root', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  // BENCH_LOG_DIR=<dir> keeps each process's whole output there, to look into a failed run.
  if (process.env.BENCH_LOG_DIR) {
    const file = path.join(path.resolve(process.env.BENCH_LOG_DIR), `${path.basename(args.at(-1) ?? command)}-${child.pid}.log`);
    child.stdout!.on('data', (chunk: Buffer) => appendFileSync(file, chunk));
    child.stderr!.on('data', (chunk: Buffer) => appendFileSync(file, chunk));
  }
  const lines: Record<string, unknown>[] = [];
  let tail = '';
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const text = partial + chunk.toString('utf8');
    const parts = text.split('\n');
    partial = parts.pop()!;
    for (const line of parts) {
      try { lines.push(JSON.parse(line)); } catch { tail = (tail + line + '\n').slice(-4000); }
    }
  });
  child.stderr!.on('data', (chunk: Buffer) => { tail = (tail + chunk.toString('utf8')).slice(-4000); });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => { children.delete(child); resolve(code); }));
  return {
    pid: child.pid!,
    exited,
    output: () => tail,
    async logLine(msg, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const found = lines.find((l) => l.msg === msg);
        if (found) return found;
        if (child.exitCode !== null) break;
        await sleep(25);
      }
      throw new Error(`${path.basename(args.at(-1) ?? command)}: no "${msg}" log line; output:\n${tail}`);
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 12_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A helper script of the benchmarks on the project's Node 24, with the tsx loader. */
export function spawnMailroom(entry: string, env: Record<string, string>): Service {
  return spawnService(process.execPath, ['--import', 'tsx', path.join(ROOT, entry)], env);
}

/**
 * A Mailroom role as production runs it: the bundle in dist/ (built by the runner first) with
 * the Node flags and environment of its `npm run start:<role>` script, read from package.json so
 * they cannot drift.
 */
export function spawnRole(role: 'api' | 'worker', env: Record<string, string>): Service {
  const scripts = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts as Record<string, string>;
  const words = scripts[`start:${role}`]!.split(/\s+/);
  // Leading NAME=value words are the environment the script gives node.
  const scriptEnv: Record<string, string> = {};
  while (/^[A-Z_]+=/.test(words[0] ?? '')) {
    const [name, value] = words.shift()!.split('=') as [string, string];
    scriptEnv[name] = value;
  }
  const [command, ...args] = words;
  if (command !== 'node') throw new Error(`start:${role} does not start node directly`);
  // BENCH_CPU_PROF=<dir> writes a V8 CPU profile of each role process there when it exits.
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(process.env.BENCH_CPU_PROF)}`] : [];
  return spawnService(process.execPath, [...profile, ...args.map((a) => (a.startsWith('dist/') ? path.join(ROOT, a) : a))], { ...scriptEnv, ...env });
}

/**
 * Worker processes for the length of `measure`: started, waited for, and always stopped.
 * `measure` gets their pids, to read their CPU time.
 */
export async function withWorkers<T>(count: number, env: (i: number) => Record<string, string>, measure: (pids: number[]) => Promise<T>): Promise<T> {
  const workers = Array.from({ length: count }, (_, i) => spawnRole('worker', env(i)));
  try {
    await Promise.all(workers.map((w) => w.logLine('worker running')));
    return await measure(workers.map((w) => w.pid));
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
}

/** A worker process for the length of `measure`: started, waited for, and always stopped. */
export function withWorker<T>(env: Record<string, string>, measure: (pid: number) => Promise<T>): Promise<T> {
  return withWorkers(1, () => env, ([pid]) => measure(pid!));
}

const CLOCK_TICKS = 100; // USER_HZ on Linux

/** User plus system CPU seconds a process has used so far, from /proc. */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** CPU seconds of every PostgreSQL server process now running (the benchmarks have the server to themselves). */
export function postgresCpuSeconds(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') total += cpuSeconds(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return total;
}

/**
 * CPU seconds spent during `measure` by the given processes, PostgreSQL and this benchmark
 * process, beside the wall time: whichever is near the wall time (or, for PostgreSQL, near the
 * machine's spare cores) is the limit.
 */
export async function cpuDuring<T>(pids: Record<string, number>, measure: () => Promise<T>) {
  const read = (): Record<string, number> => ({
    ...Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuSeconds(pid)])),
    postgres: postgresCpuSeconds(),
    bench: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
  });
  const before = read();
  const started = performance.now();
  const result = await measure();
  const wall = (performance.now() - started) / 1000;
  const after = read();
  const cpu: Record<string, number> = { wall: round(wall, 2) };
  for (const name of Object.keys(after)) cpu[name] = round(after[name]! - before[name]!, 2);
  return { result, cpu, seconds: wall };
}

/**
 * Seconds a process's main thread (the event loop) has spent on a CPU and waiting for one, from
 * the scheduler's own counters. Waiting for a CPU is time a request was ready and nothing ran it:
 * on a machine whose cores are shared with PostgreSQL and the load, that is part of the latency.
 */
export function mainThreadSchedule(pid: number): { onCpu: number; waiting: number } {
  const [onCpuNs, waitingNs] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
  return { onCpu: onCpuNs! / 1e9, waiting: waitingNs! / 1e9 };
}

export type RuntimeFigures = {
  /** Total garbage collection pause seconds so far, by kind (minor, major, incremental, weakcb). */
  gcSeconds: Record<string, number>;
  /**
   * Event-loop delay since the previous scrape (prom-client resets its histogram on each one):
   * how late the loop ran a timer that was due.
   */
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  /**
   * `POST /v1/emails` requests as the API timed them itself (from routing to the answer), so far:
   * how many took at most each bucket's bound, in seconds (`Infinity` counts them all).
   */
  sendsWithin: Map<number, number>;
};

/**
 * prom-client samples the loop with a timer repeating every 10 ms (its default, which Mailroom
 * keeps), and its lag gauges report the whole time between two runs of that timer: an idle loop
 * reads about 10 ms. The delay is what lies beyond it.
 */
const LOOP_SAMPLE_MS = 10;

/** The Node runtime figures a Mailroom process exports on `/metrics` (prom-client's defaults). */
export async function runtimeFigures(metricsUrl: string): Promise<RuntimeFigures> {
  const res = await fetch(metricsUrl);
  if (!res.ok) throw new Error(`${metricsUrl} answered ${res.status}`);
  const text = await res.text();
  const families = new Map((parsePrometheusTextFormat(text) as MetricFamily[]).map((f) => [f.name, f]));
  const gauge = (name: string) => Number(families.get(name)?.metrics[0]?.value ?? NaN);
  // The parser keeps only a histogram's buckets, so the pause totals come from the `_sum` lines.
  const gcSeconds: Record<string, number> = {};
  for (const [, kind, value] of text.matchAll(/^nodejs_gc_duration_seconds_sum\{kind="(\w+)"\} (\S+)$/gm)) gcSeconds[kind!] = Number(value);
  const sendsWithin = new Map<number, number>();
  for (const [, labels, count] of text.matchAll(/^mailroom_http_request_duration_seconds_bucket\{([^}]*)\} (\S+)$/gm)) {
    const le = /\ble="([^"]+)"/.exec(labels!)?.[1];
    if (le && labels!.includes('method="POST"') && labels!.includes('route="/v1/emails"')) sendsWithin.set(le === '+Inf' ? Infinity : Number(le), Number(count));
  }
  return {
    gcSeconds,
    sendsWithin,
    loopDelayP99Ms: gauge('nodejs_eventloop_lag_p99_seconds') * 1000 - LOOP_SAMPLE_MS,
    loopDelayMaxMs: gauge('nodejs_eventloop_lag_max_seconds') * 1000 - LOOP_SAMPLE_MS,
  };
}
type MetricFamily = { name: string; metrics: Array<{ value?: string }> };

/**
 * From two scrapes, the share of the sends in between that the API itself timed over
 * `boundSeconds`, and the smallest bucket bound that holds 99% of them: its own p99 is at most that.
 */
export function ownTiming(before: RuntimeFigures, after: RuntimeFigures, boundSeconds: number) {
  const within = (le: number) => (after.sendsWithin.get(le) ?? 0) - (before.sendsWithin.get(le) ?? 0);
  const total = within(Infinity);
  const p99Bound = [...after.sendsWithin.keys()].sort((a, b) => a - b).find((le) => within(le) >= 0.99 * total);
  return {
    overShare: total ? round(1 - within(boundSeconds) / total, 4) : null,
    p99AtMostMs: p99Bound === undefined || p99Bound === Infinity ? null : p99Bound * 1000,
  };
}

/** Resident set size (VmRSS) of a running process now, in MiB. */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return round(Number(/^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? NaN) / 1024);
}

/** Peak resident set size (VmHWM) of a running process, in MiB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/^VmHWM:\s+(\d+)\s+kB/m.exec(status)?.[1] ?? NaN);
  return round(kb / 1024);
}

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function waitForPort(port: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => { socket.destroy(); resolve(true); });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await sleep(50);
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`);
}

/** Polls `check` until it returns true; throws after `timeoutMs` naming `what`. */
export async function waitUntil(what: string, check: () => Promise<boolean>, timeoutMs = 180_000, everyMs = 50) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/**
 * Waits for a backlog the service is working through, without loading the database being
 * measured: `busy`, a lookup that stops at the first unfinished row, runs every 50 ms; `tally`,
 * a count over the whole backlog that throws on failures and says whether all is done, runs once
 * a second and when `busy` turns false. `busy` goes through `plannedEachTime`: a plan cached
 * while the tables were small scans them whole.
 */
export async function waitFinished(what: string, busy: () => Promise<boolean>, tally: () => Promise<boolean>, timeoutMs = 180_000) {
  const deadline = Date.now() + timeoutMs;
  let tallied = Date.now();
  for (;;) {
    const idle = !(await busy());
    if (idle || Date.now() - tallied >= 1000) {
      if (await tally()) return;
      tallied = Date.now();
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A new database on the admin URL's server, migrated as production would be (plus any work in
 * progress in migrations/current.sql, as the test setup does). `drop()` removes it.
 */
export async function freshDatabase(adminUrl: string, label: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `mailroom_bench_${label}_${process.pid}`;
  const admin = postgres(adminUrl, { max: 1, onnotice: () => {} });
  const drop = async () => { await admin.unsafe(`drop database if exists "${name}" with (force)`); };
  try {
    await drop();
    await admin.unsafe(`create database "${name}" template template0`);
    const url = withDatabase(adminUrl, name);
    await migrateDatabase(url, { views: false });
    // Uncommitted schema work applies too, and the ops views after it, as after any migration.
    const current = await readFile(path.join(ROOT, 'migrations/current.sql'), 'utf8');
    const db = postgres(url, { max: 1, onnotice: () => {} });
    try {
      if (current.replace(/--.*$/gm, '').trim()) await db.unsafe(current);
      await applyViews(db);
    } finally { await db.end(); }
    // BENCH_KEEP_DB=1 leaves the database for reading afterwards (EXPLAIN on the loaded history).
    if (process.env.BENCH_KEEP_DB === '1') {
      return { url, drop: async () => { process.stderr.write(`# kept database ${name}\n`); await admin.end(); } };
    }
    return { url, drop: async () => { try { await drop(); } finally { await admin.end(); } } };
  } catch (err) {
    await drop().catch(() => {});
    await admin.end();
    throw err;
  }
}

/** Sends PING and expects +PONG within a second. */
export function redisAnswers(url: string): Promise<boolean> {
  const u = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(u.port || 6379), u.hostname || '127.0.0.1');
    const done = (ok: boolean) => { socket.destroy(); resolve(ok); };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write(u.password ? `AUTH ${decodeURIComponent(u.password)}\r\nPING\r\n` : 'PING\r\n'));
    socket.on('data', (d) => { if (d.toString().includes('+PONG')) done(true); });
  });
}

/** A fresh project with a key, and the API as production runs it, for the accept benchmarks. */
export async function apiWithKey(ctx: BenchContext, label: string, env: Record<string, string> = {}) {
  const sql = createSql(ctx.databaseUrl, { max: 2 });
  const project = await createProject(sql, label);
  const { key } = await createApiKey(sql, project.id, 'bench');
  const api = spawnRole('api', { ...ctx.env, PORT: '0', HOST: '127.0.0.1', API_RATE_LIMIT_PER_MINUTE: '1000000', ...env });
  return { sql, projectId: project.id, key, api };
}
