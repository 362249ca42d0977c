import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase } from '../helpers/db.ts';
import { ROOT } from '../helpers/process.ts';
import { TEST_SECRET_KEY } from '../helpers/app.ts';

// §16.10: a process manager starts every role at once from one checkout, and all come up. The
// checkout is a fresh copy with no dist/, so every start races to build it.
const checkout = mkdtempSync(path.join(tmpdir(), 'mailroom-checkout-'));
for (const entry of ['src', 'dashboard', 'scripts', 'migrations', 'sql', 'package.json', 'package-lock.json', '.gmrc']) {
  cpSync(path.join(ROOT, entry), path.join(checkout, entry), { recursive: true });
}
symlinkSync(path.join(ROOT, 'node_modules'), path.join(checkout, 'node_modules'));

const children: ChildProcess[] = [];
after(async () => {
  // npm runs the server under a shell: the whole process group goes.
  for (const child of children) {
    try { process.kill(-child.pid!, 'SIGKILL'); } catch { /* already gone */ }
  }
  rmSync(checkout, { recursive: true, force: true });
});

function start(script: string, env: Record<string, string>) {
  const child = spawn('npm', ['run', '--silent', script], {
    cwd: checkout,
    detached: true,
    env: { PATH: process.env.PATH!, HOME: process.env.HOME ?? '/root', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => { out += d; });
  child.stderr!.on('data', (d) => { err += d; });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const ready = async (msgs: string[], timeoutMs: number) => {
    const deadline = Date.now() + timeoutMs;
    const seen = () => msgs.every((m) => out.includes(`"msg":"${m}"`));
    while (!seen()) {
      if (child.exitCode !== null || Date.now() > deadline) {
        throw new Error(`${script} did not come up (exit ${child.exitCode}); stdout:\n${out.slice(-2000)}\nstderr:\n${err.slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  return { child, ready, exited, script };
}

test('2× npm start, 2× start:api and 2× start:worker, together and a moment apart, from one fresh checkout all come up', async () => {
  const { url } = await createTestDatabase();
  const env = {
    DATABASE_URL: url, REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379', SECRET_KEY: TEST_SECRET_KEY,
    PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SINK_SMTP_PORT: '0', METRICS_PORT: '0',
  };
  const roles: Array<[string, string[]]> = [
    ['start', ['api listening', 'worker running']],
    ['start', ['api listening', 'worker running']],
    ['start:api', ['api listening']],
    ['start:api', ['api listening']],
    ['start:worker', ['worker running']],
    ['start:worker', ['worker running']],
  ];
  // Half start at the same instant; the rest follow one by one while the first are building and
  // loading, as a process manager restarting roles would.
  const started: Array<{ p: ReturnType<typeof start>; msgs: string[] }> = [];
  for (const [i, [script, msgs]] of roles.entries()) {
    if (i >= 3) await new Promise((r) => setTimeout(r, 700));
    started.push({ p: start(script, env), msgs });
  }
  const results = await Promise.allSettled(started.map(({ p, msgs }) => p.ready(msgs, 90_000)));
  const failed = results.flatMap((r) => (r.status === 'rejected' ? [String(r.reason)] : []));
  assert.deepEqual(failed, [], failed.join('\n\n'));
});
