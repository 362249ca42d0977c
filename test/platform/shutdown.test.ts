import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runSteps } from '../../src/platform/shutdown.ts';
import { createLogger } from '../../src/platform/log.ts';

const log = createLogger('silent');

test('shutdown runs every step in order within one budget, even past a stuck or failing step', async () => {
  const ran: string[] = [];
  const started = Date.now();
  await runSteps(log, [
    ['http', async () => { ran.push('http'); }],
    ['stuck jobs', () => { ran.push('jobs'); return new Promise(() => {}); }],
    ['broken', async () => { ran.push('broken'); throw new Error('boom'); }],
    ['database', async () => { ran.push('database'); }],
  ], Date.now() + 300);
  const took = Date.now() - started;
  assert.deepEqual(ran, ['http', 'jobs', 'broken', 'database']);
  assert.ok(took >= 300 && took < 1500, `bounded by the budget (took ${took} ms)`);
});

test('steps that finish early leave the rest of the budget unused', async () => {
  const started = Date.now();
  await runSteps(log, [['quick', async () => {}], ['also quick', async () => {}]], Date.now() + 10_000);
  assert.ok(Date.now() - started < 200);
});

test('a promise rejected with no handler stops the process through the same shutdown, with 1 and the reason logged', async () => {
  const shutdownModule = fileURLToPath(new URL('../../src/platform/shutdown.ts', import.meta.url));
  const logModule = fileURLToPath(new URL('../../src/platform/log.ts', import.meta.url));
  const script = `
    const { onShutdown } = await import(${JSON.stringify(shutdownModule)});
    const { createLogger } = await import(${JSON.stringify(logModule)});
    onShutdown(createLogger('info'), [['jobs', async () => { process.stdout.write('jobs step ran\\n'); }]]);
    setInterval(() => {}, 1000);
    Promise.reject(new Error('lost connection'));
  `;
  const outcome = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 20_000 }, (_err, stdout) => {
      resolve({ code: child.exitCode, stdout });
    });
  });
  assert.equal(outcome.code, 1);
  assert.match(outcome.stdout, /unhandled promise rejection; shutting down/);
  assert.match(outcome.stdout, /lost connection/);
  assert.match(outcome.stdout, /jobs step ran/);
});

test('a rejection of a replaced job runner\'s refused work, as graphile-worker wraps it, does not stop the process', async () => {
  const shutdownModule = fileURLToPath(new URL('../../src/platform/shutdown.ts', import.meta.url));
  const logModule = fileURLToPath(new URL('../../src/platform/log.ts', import.meta.url));
  const script = `
    const { onShutdown, REPLACED_RUNNER_REFUSAL } = await import(${JSON.stringify(shutdownModule)});
    const { createLogger } = await import(${JSON.stringify(logModule)});
    onShutdown(createLogger('info'), []);
    Promise.reject(new Error('Error occurred whilst returning jobs from local queue to database queue: ' + REPLACED_RUNNER_REFUSAL));
    setTimeout(() => { process.stdout.write('still running\\n'); process.exit(0); }, 300);
  `;
  const outcome = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { timeout: 20_000 }, (_err, stdout) => {
      resolve({ code: child.exitCode, stdout });
    });
  });
  assert.equal(outcome.code, 0);
  assert.match(outcome.stdout, /late work of a replaced job runner refused/);
  assert.match(outcome.stdout, /still running/);
  assert.doesNotMatch(outcome.stdout, /shutting down/);
});
