import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { spawnEntry } from '../helpers/process.ts';

// §22.8: one project's renders never fail another's. Project A keeps 100 of its heaviest allowed
// renders going against a real API process; project B's renders answer 200 within 2 s, and A's
// renders past 32 waiting are refused with 429 in each surface's error shape.

const ctx = await createTestContext();
const a = await ctx.tenant('a');
const b = await ctx.tenant('b');
after(async () => {
  api.child.kill('SIGTERM');
  await api.exited;
});
const api = spawnEntry('src/api.ts', {
  DATABASE_URL: ctx.url, REDIS_URL: process.env.REDIS_URL || 'redis://127.0.0.1:6379', SECRET_KEY: TEST_SECRET_KEY,
  PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', API_RATE_LIMIT_PER_MINUTE: '1000000',
});
const { url } = (await api.logLine('api listening')) as { url: string };

async function call(key: string, path: string, body: unknown) {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: res.status, body: json, headers: res.headers, text };
}

// The heaviest render §18.1 allows (test/templates/budgets.test.ts): 2,000 {{v}} per part, v 2,000
// `&`, rendered until it passes the message limit and answered 422 message_too_large.
const AT_CAP = '{{v}}'.repeat(2_000);
const HEAVY_VALUES = { v: '&'.repeat(2_000) };
const heavy = (await call(a.key, '/v1/templates', { name: 'Heavy', subject: '{{v}}', html: AT_CAP, text: AT_CAP, variables: [{ key: 'v', type: 'string' }] })).body.id as string;
// B's template renders past the event loop's inline bound (32 KB of output), so each render goes to a thread.
const light = (await call(b.key, '/v1/templates', { name: 'Receipt', subject: 'Hi {{n}}', html: '<p>{{n}}</p>', variables: [{ key: 'n', type: 'string' }] })).body.id as string;
const B_VALUES = { n: '&'.repeat(10_000) };

test('while A keeps 100 heaviest renders going, B renders within 2 s; A past 32 waiting gets 429', { timeout: 300_000 }, async () => {
  assert.ok(heavy && light);
  // Warm: both templates compiled, and A's heavy render known to be what it is.
  const first = await call(a.key, `/v1/templates/${heavy}/render`, { variables: HEAVY_VALUES });
  assert.equal(first.status, 422, first.text.slice(0, 300));
  assert.equal((first.body.detail as { type: string }[])[0]!.type, 'message_too_large');
  assert.equal((await call(b.key, `/v1/templates/${light}/render`, { variables: B_VALUES })).status, 200);

  const seen = new Map<string, number>();
  let stop = false;
  let refusedOnce: () => void;
  const refused = new Promise<void>((resolve) => { refusedOnce = resolve; });
  // 100 clients, each sending A's heavy render again as soon as it is answered; a 429 waits its Retry-After.
  const clients = Array.from({ length: 100 }, async () => {
    while (!stop) {
      const r = await call(a.key, `/v1/templates/${heavy}/render`, { variables: HEAVY_VALUES });
      const kind = r.status === 422 ? `422 ${(r.body.detail as { type: string }[])[0]!.type}` : r.status === 429 ? `429 ${(r.body.error as { type: string }).type}` : `${r.status} ${r.text.slice(0, 200)}`;
      seen.set(kind, (seen.get(kind) ?? 0) + 1);
      if (r.status === 429) {
        assert.equal(r.headers.get('retry-after'), '1');
        refusedOnce();
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  });
  // A's queue is full: 32 of its renders wait.
  await Promise.race([refused, new Promise((_, reject) => setTimeout(() => { stop = true; reject(new Error('A was never refused with 429')); }, 60_000).unref())]);
  // A steady state: A's renders have been running a while (and every render thread has started).
  while ((seen.get('422 message_too_large') ?? 0) < 3) await new Promise((resolve) => setTimeout(resolve, 100));

  // The same refusal in Resend's shape on /resend (a template's check waits in A's queue too).
  let resend: Awaited<ReturnType<typeof call>> | undefined;
  for (let i = 0; i < 20 && resend?.status !== 429; i++) {
    resend = await call(a.key, '/resend/templates', { name: 'Another', html: '<p>{{n}}</p>', variables: [{ key: 'n', type: 'string' }] });
  }
  assert.equal(resend!.status, 429, resend!.text);
  assert.deepEqual(resend!.body, { statusCode: 429, name: 'rate_limit_exceeded', message: resend!.body.message });

  const timings: number[] = [];
  for (let i = 0; i < 8; i++) {
    const t = performance.now();
    const r = await call(b.key, `/v1/templates/${light}/render`, { variables: B_VALUES });
    timings.push(Math.round(performance.now() - t));
    assert.equal(r.status, 200, r.text.slice(0, 300));
    assert.equal(r.body.html, `<p>${'&amp;'.repeat(10_000)}</p>`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  stop = true;
  await Promise.all(clients);
  console.log(JSON.stringify({ b_render_ms: timings, a_outcomes: Object.fromEntries(seen) }));
  for (const ms of timings) assert.ok(ms < 2_000, `B's render took ${ms} ms: ${timings.join(', ')}`);
  // A's renders either ran to their own end or were refused: none failed for waiting.
  assert.deepEqual([...seen.keys()].sort(), ['422 message_too_large', '429 rate_limit_exceeded']);
});
