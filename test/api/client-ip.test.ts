import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { createTestContext } from '../helpers/app.ts';

// Requests reach the app over a real socket from 127.0.0.1, the one trusted proxy.
const ctx = await createTestContext({ env: { TRUST_PROXY: '127.0.0.1/32,10.0.0.0/8' } });
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const badKey = (xff: string) =>
  fetch(`${base}/v1/emails`, { headers: { authorization: 'Bearer sk_wrong', 'x-forwarded-for': xff } }).then(async (r) => { await r.text(); return r.status; });

test('a forged leftmost X-Forwarded-For does not escape the failed-authentication limit', async () => {
  // The client writes whatever it likes on the left; the trusted proxies append the real address.
  const statuses = [];
  for (let i = 0; i < 61; i++) statuses.push(await badKey(`198.51.100.${i % 250}, 203.0.113.5, 10.1.2.3`));
  assert.deepEqual(statuses.slice(0, 60), Array(60).fill(401));
  assert.equal(statuses[60], 429, 'the 61st failure from 203.0.113.5 is limited whatever the left entries say');
  assert.equal(await badKey('203.0.113.6'), 401, 'another client is counted apart');
});
