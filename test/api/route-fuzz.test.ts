import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTestContext } from '../helpers/app.ts';

const ctx = await createTestContext();
const { key } = await ctx.tenant();

const doc = (await (await ctx.call(undefined, '/openapi.json')).json()) as { paths: Record<string, Record<string, unknown>> };
/** Every GET and DELETE of the API with its path parameters: the routes a URL alone can reach. */
const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
  Object.keys(ops).filter((m) => m === 'get' || m === 'delete').map((method) => ({ method: method.toUpperCase(), path })));

const hostile = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constantFrom('\u0000', 'email_\u0000', 'email_', 'email_01ARZ3NDEKTSV4RRFFQ69G5FA', 'email_01arz3ndektsv4rrffq69g5fav', '..', '%', '\r\n'),
  fc.stringMatching(/^[a-z]{2,6}_[0-9A-Z]{20,30}$/),
  fc.bigInt().map(String),
);

async function call(method: string, url: string) {
  const res = await ctx.app.request(url, { method, headers: { authorization: `Bearer ${key}` } });
  const text = await res.text();
  assert.ok(res.status < 500, `${method} ${url} answered ${res.status}: ${text.slice(0, 300)}`);
  if (res.status >= 400) {
    const body = JSON.parse(text) as { error?: { type: string }; detail?: unknown[] };
    assert.ok(body.error?.type || Array.isArray(body.detail), `${method} ${url}: ${text.slice(0, 300)}`);
  }
  return res.status;
}

test('malformed ids and cursors answer 404 not_found on every route, control bytes included', async () => {
  for (const { method, path } of routes.filter((r) => r.path.includes('{'))) {
    for (const bad of ['email_%00', '%00', 'email_01ARZ3NDEKTSV4RRFFQ69G5FA', 'x'.repeat(90)]) {
      const url = path.replace(/\{[^}]+\}/g, bad);
      const res = await ctx.app.request(url, { method, headers: { authorization: `Bearer ${key}` } });
      assert.equal(res.status, 404, `${method} ${url}`);
      assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'not_found');
    }
  }
  for (const list of ['/v1/emails', '/v1/sink/messages']) {
    const res = await ctx.call(key, `${list}?starting_after=email_%00`);
    assert.equal(res.status, 404, list);
  }
});

test('fuzzed path parameters and query strings never get a 5xx', async () => {
  assert.ok(routes.length >= 8, `${routes.length} routes found`);
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...routes),
      hostile,
      fc.dictionary(fc.constantFrom('limit', 'starting_after', 'status', 'tag', 'email', 'x'), hostile, { maxKeys: 3 }),
      async (route, param, query) => {
        const path = route.path.replace(/\{[^}]+\}/g, encodeURIComponent(param));
        const qs = new URLSearchParams(query).toString();
        await call(route.method, qs ? `${path}?${qs}` : path);
      },
    ),
    { numRuns: 300 },
  );
});
