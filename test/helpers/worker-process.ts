import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { after } from 'node:test';
import { TEST_SECRET_KEY } from './app.ts';
import { ROOT } from './process.ts';

/** A loopback port free right now, for a child process's listener. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A worker process's settings for tests that stop it the hard way: it sends through its own sink,
 * retries quickly, and a pool silent for 3 s counts as dead, so what it held is freed soon.
 */
export async function sinkWorkerEnv(databaseUrl: string, redisUrl: string): Promise<Record<string, string>> {
  return {
    DATABASE_URL: databaseUrl,
    SECRET_KEY: TEST_SECRET_KEY,
    REDIS_URL: redisUrl,
    LOG_LEVEL: 'silent',
    SINK_SMTP_HOST: '127.0.0.1',
    SINK_SMTP_PORT: String(await freePort()),
    WORKER_CONCURRENCY: '4',
    WORKER_DEAD_AFTER_SECONDS: '3',
    EMAIL_RETRY_BASE_MS: '100',
  };
}

const children = new Set<ChildProcess>();
after(() => { for (const child of children) child.kill('SIGKILL'); });

/**
 * The production worker entry point as its own process (one process, so SIGKILL is a real crash).
 * `stdout: 'pipe'` keeps its log readable from `child.stdout`.
 */
export function startWorkerProcess(env: Record<string, string>, stdout: 'ignore' | 'pipe' = 'ignore'): ChildProcess {
  const child = spawn(process.execPath, [path.join(ROOT, 'dist/worker.js')], {
    env: { PATH: process.env.PATH ?? '', METRICS_PORT: '0', ...env },
    stdio: ['ignore', stdout, 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => { stderr += d.toString(); });
  child.on('exit', (code, signal) => {
    children.delete(child);
    if (code && signal === null) process.stderr.write(`# worker exited ${code}: ${stderr.slice(0, 2000)}\n`);
  });
  children.add(child);
  return child;
}

/** Sends the signal and waits for the process to be gone. */
export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM') {
  child.kill(signal);
  await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once('exit', resolve)));
}
