import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { revokeApiKey } from '../../src/keys/service.ts';
import { keyLookupQueries } from '../../src/keys/authenticate.ts';

const ctx = await createTestContext();
const A = await ctx.tenant('auth-a');
const INVALID = { error: { type: 'authentication_failed', message: 'Invalid or missing API key.' } };

test('a valid key reads its project', async () => {
  const res = await ctx.call(A.key, '/v1/api-keys');
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.data.length, 1);
  assert.equal(body.data[0].id, A.keyId);
  assert.equal(body.data[0].key_prefix, A.key.slice(0, 12));
  assert.ok(!JSON.stringify(body).includes(A.key), 'the secret is never returned');
});

test('missing, malformed, wrong-scheme, unknown and revoked keys get the identical 401', async () => {
  const other = await ctx.tenant('auth-revoked');
  await revokeApiKey(ctx.sql, other.projectId, other.keyId);
  const cases: Array<Record<string, string>> = [
    {},
    { authorization: '' },
    { authorization: 'Bearer' },
    { authorization: 'Bearer not-a-key' },
    { authorization: `Basic ${A.key}` },
    { authorization: `Bearer sk_${'A'.repeat(43)}` },
    { authorization: `Bearer ${A.key}x` },
    { authorization: `Bearer ${other.key}` },
  ];
  for (const headers of cases) {
    const res = await ctx.call(undefined, '/v1/emails', { headers });
    assert.equal(res.status, 401, JSON.stringify(headers));
    assert.deepEqual(await res.json(), INVALID);
  }
});

test('revocation is immediate and permanent, and listed with revoked_at', async () => {
  const t = await ctx.tenant('auth-revoke-later');
  assert.equal((await ctx.call(t.key, '/v1/emails')).status, 200);
  const first = await revokeApiKey(ctx.sql, undefined, t.keyId);
  const again = await revokeApiKey(ctx.sql, undefined, t.keyId);
  assert.equal(again.revokedAt!.getTime(), first.revokedAt!.getTime(), 'revoking twice keeps the first time');
  assert.equal((await ctx.call(t.key, '/v1/emails')).status, 401);
  const second = await ctx.sql`select id from api_keys where project_id = ${t.projectId}`;
  assert.equal(second.length, 1);
});

test('last_used_at is written at most once a minute', async () => {
  const t = await ctx.tenant('auth-touch');
  await ctx.call(t.key, '/v1/emails');
  const [first] = await ctx.sql`select last_used_at from api_keys where id = ${t.keyId}`;
  assert.ok(first!.lastUsedAt instanceof Date);
  await ctx.sql`update api_keys set last_used_at = now() - interval '30 seconds' where id = ${t.keyId}`;
  const [moved] = await ctx.sql`select last_used_at from api_keys where id = ${t.keyId}`;
  await ctx.call(t.key, '/v1/emails');
  const [second] = await ctx.sql`select last_used_at from api_keys where id = ${t.keyId}`;
  assert.equal(second!.lastUsedAt.getTime(), moved!.lastUsedAt.getTime(), 'not rewritten within the minute');
});

test('a key authenticates only its own project', async () => {
  const B = await ctx.tenant('auth-b');
  const res = await ctx.call(B.key, '/v1/api-keys');
  const body = await res.json();
  assert.deepEqual(body.data.map((k: { id: string }) => k.id), [B.keyId]);
});

test('failed authentications are limited per client address', async () => {
  const fresh = await createTestContext();
  let last: Response | undefined;
  for (let i = 0; i < 61; i++) last = await fresh.call(undefined, '/v1/emails', { headers: { authorization: 'Bearer nope' } });
  assert.equal(last!.status, 429);
  assert.equal((await last!.json()).error.type, 'rate_limit_exceeded');
  assert.ok(Number(last!.headers.get('retry-after')) >= 1);
  const t = await fresh.tenant('unaffected');
  assert.equal((await fresh.call(t.key, '/v1/emails')).status, 200, 'a valid key is not blocked by guessers');
});

test('requests arriving together share one key lookup, and a key revoked under load is refused by the very next request', async () => {
  const t = await ctx.tenant('auth-coalesce');
  const before = keyLookupQueries(ctx.sql);
  const burst = await Promise.all(Array.from({ length: 20 }, () => ctx.call(t.key, '/v1/emails')));
  assert.ok(burst.every((r) => r.status === 200));
  const queries = keyLookupQueries(ctx.sql) - before;
  assert.ok(queries >= 1 && queries < 20, `20 requests made ${queries} key lookups`);

  // Keep requests in flight while revoking: each request that starts after the revoke answers 401.
  let revoked = false;
  const hammering = (async () => {
    const statuses: Array<{ afterRevoke: boolean; status: number }> = [];
    for (let i = 0; i < 200; i++) {
      const afterRevoke = revoked;
      const res = await ctx.call(t.key, '/v1/emails');
      statuses.push({ afterRevoke, status: res.status });
      if (afterRevoke && statuses.filter((s) => s.afterRevoke).length >= 5) break;
    }
    return statuses;
  })();
  await new Promise((r) => setTimeout(r, 20));
  await revokeApiKey(ctx.sql, t.projectId, t.keyId);
  revoked = true;
  const statuses = await hammering;
  const after = statuses.filter((s) => s.afterRevoke);
  assert.ok(after.length >= 1);
  assert.deepEqual(after.map((s) => s.status), after.map(() => 401), 'every request started after the revoke is refused');
});
