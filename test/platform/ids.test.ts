import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isWellFormedId, newId } from '../../src/platform/ids.ts';

test('ids are well formed and sort in the order they were made', () => {
  // Past the 4096-byte random pool several times.
  const ids = Array.from({ length: 20_000 }, () => newId('email'));
  assert.ok(ids.every((id) => isWellFormedId('email', id)));
  assert.deepEqual([...ids].sort(), ids, 'lexical order is creation order');
  assert.equal(new Set(ids).size, ids.length);
});

test('each new millisecond draws a fresh random part', () => {
  const randomParts: string[] = [];
  for (let i = 0; i < 200; i++) {
    const ms = Date.now();
    while (Date.now() === ms) { /* the next millisecond */ }
    randomParts.push(newId('event').slice('evt_'.length + 10));
  }
  assert.equal(new Set(randomParts).size, randomParts.length, 'no two alike');
  const firstSymbols = new Set(randomParts.map((r) => r[0]));
  assert.ok(firstSymbols.size >= 24, `only ${firstSymbols.size} of 32 symbols lead the random part`);
});
