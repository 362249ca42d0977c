import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { GroupCommit } from '../../src/platform/group-commit.ts';

/** A writer whose batches finish only when the test says so. */
function heldWriter() {
  const batches: Array<{ items: number[]; finish: () => void }> = [];
  const write = (items: number[]) => new Promise<number[]>((resolve) => {
    batches.push({ items, finish: () => resolve(items.map((i) => i * 10)) });
  });
  return { batches, write };
}

test('with minToOverlap, a batch starts beside one in flight only once that many items wait', async () => {
  const { batches, write } = heldWriter();
  const commit = new GroupCommit(write, { maxInFlight: 4, minToOverlap: 3 });
  const first = commit.run(1);
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1]], 'nothing in flight: one item goes at once');

  const waiting = [commit.run(2), commit.run(3)];
  await turn();
  assert.equal(batches.length, 1, 'two waiting are fewer than 3: they wait for the batch in flight');

  waiting.push(commit.run(4));
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1], [2, 3, 4]], 'the third one waiting starts a batch beside it');

  const late = commit.run(5);
  await turn();
  assert.equal(batches.length, 2);
  batches[0]!.finish();
  assert.equal(await first, 10);
  await turn();
  assert.equal(batches.length, 2, 'one is still in flight: the one waiting still waits');
  batches[1]!.finish();
  await Promise.all(waiting);
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1], [2, 3, 4], [5]], 'none in flight: the one waiting goes');
  batches[2]!.finish();
  assert.deepEqual(await Promise.all([...waiting, late]), [20, 30, 40, 50]);
});

test('by default every waiting item starts a batch while fewer than maxInFlight are written', async () => {
  const { batches, write } = heldWriter();
  const commit = new GroupCommit(write, { maxInFlight: 2 });
  const results = [commit.run(1)];
  await turn();
  results.push(commit.run(2));
  await turn();
  results.push(commit.run(3));
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1], [2]], 'the third waits: two are in flight');
  batches[0]!.finish();
  await results[0];
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1], [2], [3]]);
  for (const b of batches.slice(1)) b.finish();
  assert.deepEqual(await Promise.all(results), [10, 20, 30]);
});

test('a batch waits for announced items, and goes once they arrive', async () => {
  const { batches, write } = heldWriter();
  const commit = new GroupCommit(write, { maxArrivalWaitMs: 1_000 });
  const first = commit.announce();
  const second = commit.announce();
  const results = [commit.run(1, first)];
  await turn();
  assert.equal(batches.length, 0, 'one more is announced: the batch waits for it');
  results.push(commit.run(2, second));
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1, 2]], 'the last announced arrived: both go together');
  batches[0]!.finish();
  assert.deepEqual(await Promise.all(results), [10, 20]);
});

test('an announced item given up on, or late, holds no batch', async () => {
  const { batches, write } = heldWriter();
  const commit = new GroupCommit(write, { maxArrivalWaitMs: 30 });
  const abandoned = commit.announce();
  const first = commit.run(1);
  await turn();
  assert.equal(batches.length, 0);
  abandoned.arrived();
  abandoned.arrived();
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1]], 'withdrawn (twice counts once): the batch goes');
  batches[0]!.finish();
  await first;

  commit.announce();
  const started = performance.now();
  const second = commit.run(2);
  while (batches.length < 2) await new Promise((resolve) => setTimeout(resolve, 2));
  const waited = performance.now() - started;
  assert.ok(waited >= 28 && waited < 1_000, `a late one is waited for 30 ms, not more (waited ${waited.toFixed(1)} ms)`);
  assert.deepEqual(batches[1]!.items, [2]);
  batches[1]!.finish();
  assert.equal(await second, 20);
});

test('without maxArrivalWaitMs an announcement changes nothing', async () => {
  const { batches, write } = heldWriter();
  const commit = new GroupCommit(write);
  commit.announce();
  const result = commit.run(1);
  await turn();
  assert.deepEqual(batches.map((b) => b.items), [[1]]);
  batches[0]!.finish();
  assert.equal(await result, 10);
});
