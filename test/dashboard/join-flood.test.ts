import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { spawnApi, whileProbing, withinBudget } from '../helpers/responsiveness.ts';
import { hmacSha256Hex, randomBase64url } from '../../src/platform/crypto.ts';

// §22.5: twenty parallel POST /dashboard/join/<unknown token>, three rounds, against a real API
// process: every answer is 410 or 429, /healthz answers every probe within 250 ms and the API's
// RSS stays under 400 MB. Each such request once ran a 128 MiB scrypt before the token was read.

const ctx = await createTestContext();
const { api, url } = await spawnApi(ctx.url);

// The pre-session CSRF cookie and its form token: anyone can make the pair (double submit).
const first = await fetch(`${url}/dashboard/login`, { redirect: 'manual' });
const cookie = first.headers.getSetCookie().map((c) => c.split(';')[0]!).find((c) => c.startsWith('mailroom_csrf='))!;
assert.ok(cookie, 'the dashboard sets its pre-session CSRF cookie');
const csrf = hmacSha256Hex(cookie.slice('mailroom_csrf='.length), 'mailroom-dashboard-form');

/** One join with an unknown token and a password long enough to be hashed. */
async function join(): Promise<number> {
  const res = await fetch(`${url}/dashboard/join/${randomBase64url(32)}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrf, password: 'a long enough password' }).toString(),
  });
  await res.arrayBuffer();
  return res.status;
}

// The paths answer once first (a GET of the join page, one join), so what is measured is the
// flood, not the first request's compiling and connecting.
for (let i = 0; i < 2; i++) await (await fetch(`${url}/dashboard/join/${randomBase64url(32)}`)).arrayBuffer();
const warmed = await join();

test('twenty parallel joins with unknown tokens, three rounds: each 410 or 429, /healthz within 250 ms, RSS under 400 MB', { timeout: 300_000 }, async () => {
  const statuses: number[] = [];
  const m = await withinBudget(5, 250, () => whileProbing(url, 'join flood: 3 × 20 unknown tokens', async () => {
    for (let round = 0; round < 3; round++) statuses.push(...await Promise.all(Array.from({ length: 20 }, join)));
  }, { pid: api.child.pid! }), 400);
  assert.ok([410, 429].includes(warmed));
  assert.ok(statuses.every((s) => s === 410 || s === 429), `answers: ${[...new Set(statuses)].join(', ')}`);
  // Redis keeps the per-client count for a minute, so a rerun may find it spent already.
  assert.ok(statuses.filter((s) => s === 410).length <= 10, 'at most 10 attempts a minute from one address reach the token');
  assert.ok(statuses.includes(429));
  assert.ok(m.worst <= 250, `a /healthz probe waited ${m.worst.toFixed(0)} ms`);
  assert.ok(m.rss < 400, `the API's RSS reached ${m.rss.toFixed(0)} MB`);
});
