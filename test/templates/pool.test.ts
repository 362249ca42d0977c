import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RenderTooLarge, type Values } from '../../src/templates/engine.ts';
import { sourcePart, TemplatePool, TemplateQueueFull, TemplateThreadError } from '../../src/templates/threads.ts';

// §22.8 at the pool itself: a request's time budget starts when a thread takes it, and a project
// with 32 requests waiting has its next one refused while other projects' are taken.

// The heaviest render §18.1 allows: 2,000 {{v}} per part, v 2,000 `&` (escaped, 10 KB a turn),
// rendered until it passes the 10 MiB message limit.
const AT_CAP = '{{v}}'.repeat(2_000);
const heavy = [sourcePart('subject', '{{v}}'), sourcePart('html', AT_CAP), sourcePart('text', AT_CAP)];
const values = Object.assign(Object.create(null) as Values, { v: '&'.repeat(2_000) });
const LIMIT = 10 * 1024 * 1024;
const small = [sourcePart('html', '<p>{{n}}</p>')];

/** Resolves with what a render came to: 'too_large', 'rendered', or the error's class name. */
const outcome = (p: Promise<unknown>) => p.then(() => 'rendered', (err: Error) => (err instanceof RenderTooLarge ? 'too_large' : err.constructor.name));

test('a render that waited in the queue still gets its whole budget', { timeout: 120_000 }, async () => {
  const probe = new TemplatePool({ cacheBytes: 64 * 1024 * 1024, threads: 1 });
  // Time a cold render (a new thread, compiling the parts) and a warm one on this machine.
  let t = performance.now();
  assert.equal(await outcome(probe.render('a', heavy, values, LIMIT)), 'too_large');
  const cold = performance.now() - t;
  let one = 0;
  for (let i = 0; i < 3; i++) {
    t = performance.now();
    await outcome(probe.render('a', heavy, values, LIMIT));
    one = Math.max(one, performance.now() - t);
  }
  // A budget of several renders, and a queue of many more: counted from queueing, the later
  // ones would run out of budget while they waited.
  const budgetMs = Math.ceil(Math.max(cold * 1.5, one * 5));
  // Enough renders to queue for about three budgets (the waiting bound is lifted for it).
  const n = Math.min(2000, Math.ceil((budgetMs * 3) / one));
  const pool = new TemplatePool({ cacheBytes: 64 * 1024 * 1024, threads: 1, budgetMs, maxWaiting: n });
  assert.equal(await outcome(pool.render('a', heavy, values, LIMIT)), 'too_large', 'the first, cold, within the budget');
  const started = performance.now();
  const outcomes = await Promise.all(Array.from({ length: n }, () => outcome(pool.render('a', heavy, values, LIMIT))));
  const took = performance.now() - started;
  console.log(JSON.stringify({ cold_render_ms: Math.round(cold), one_render_ms: Math.round(one), budget_ms: budgetMs, renders: n, queue_ms: Math.round(took) }));
  assert.ok(took > budgetMs, `the queue took ${took} ms, no longer than one budget (${budgetMs} ms): the test proves nothing`);
  assert.deepEqual(outcomes, Array(n).fill('too_large'), 'every queued render ran to its own end');
});

test('a render over its budget fails alone, as a render failure', { timeout: 60_000 }, async () => {
  const pool = new TemplatePool({ cacheBytes: 64 * 1024 * 1024, threads: 1, budgetMs: 1 });
  assert.equal(await outcome(pool.render('a', heavy, values, LIMIT)), TemplateThreadError.name);
});

test('a project with 32 requests waiting has its next refused; another project is taken at once', { timeout: 120_000 }, async () => {
  const pool = new TemplatePool({ cacheBytes: 64 * 1024 * 1024, threads: 2 });
  const order: string[] = [];
  const track = (label: string, p: Promise<unknown>) => outcome(p).then((o) => { order.push(label); return o; });
  // One runs (a project has one thread at a time; the other is kept for the rest), 32 wait; the
  // next would be the 33rd waiting.
  const a = Array.from({ length: 33 }, (_, i) => track(`a${i}`, pool.render('a', heavy, values, LIMIT)));
  const refused = await outcome(pool.render('a', heavy, values, LIMIT));
  assert.equal(refused, TemplateQueueFull.name);
  await assert.rejects(pool.check('a', small, ['n']), TemplateQueueFull, 'checks wait in the same queue');
  // Project B is not refused, and takes the spare thread before A's first render is done.
  const b = track('b', pool.render('b', small, Object.assign(Object.create(null) as Values, { n: 'x' }), LIMIT));
  assert.equal(await b, 'rendered');
  assert.deepEqual(order.slice(0, 1), ['b'], `B finished after A's ${order.join(',')}`);
  assert.deepEqual(await Promise.all(a), Array(33).fill('too_large'));
  // Once A's queue drained, A is taken again.
  assert.equal(await outcome(pool.render('a', heavy, values, LIMIT)), 'too_large');
});

test('stats sum the threads; each compiles a part once', async () => {
  const pool = new TemplatePool({ cacheBytes: 1024 * 1024, threads: 2 });
  assert.deepEqual(await pool.stats(), { compiles: 0, entries: 0, bytes: 0 });
  assert.deepEqual(await pool.check('a', small, ['n']), []);
  const after = await pool.stats();
  assert.equal(after.compiles, 1);
  // Sequential renders go to the thread that holds the parts: nothing compiles again.
  for (let i = 0; i < 3; i++) await pool.render('a', [sourcePart('html', '<p>{{n}}</p>')], Object.assign(Object.create(null) as Values, { n: 'x'.repeat(40_000) }), LIMIT);
  assert.equal((await pool.stats()).compiles, 1);
});
