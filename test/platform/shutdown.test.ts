import { test } from 'node:test';
import assert from 'node:assert/strict';
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
