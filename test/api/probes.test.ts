import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();

test('GET /healthz answers ok without auth', async () => {
  const res = await ctx.call(undefined, '/healthz');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: 'ok' });
});

test('GET /readyz round-trips the database and the limiter', async () => {
  const res = await ctx.call(undefined, '/readyz');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { status: 'ready', dependencies: { database: true, cache: true } });
});

test('unknown routes answer 404 in the ErrorResponse shape', async () => {
  const res = await ctx.call(undefined, '/nope');
  assert.equal(res.status, 404);
  assert.deepEqual(await res.json(), { error: { type: 'not_found', message: 'Route not found.' } });
});
