import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { jsonShapeGuard, MAX_JSON_VALUES, readJsonBody } from '../../src/http/body.ts';
import { ValidationError } from '../../src/http/errors.ts';
import { newId } from '../../src/platform/ids.ts';

// §22.7: a JSON body holds at most 100,000 values in all, whatever its nesting; the count runs
// over the bytes before anything is parsed. Every value counts: the body itself, each list element
// and each object member.

const ctx = await createTestContext();
const { key } = await ctx.tenant();

/** `[` + lists of `per` zeros + `]`: 1 + lists + their zeros values, no list over 1,000 entries. */
function nestedZeros(lists: number, per: number, lastPer = per): string {
  const list = (n: number) => `[${Array(n).fill('0').join(',')}]`;
  return `[${Array.from({ length: lists }, (_, i) => list(i === lists - 1 ? lastPer : per)).join(',')}]`;
}
const AT_BOUND = nestedZeros(100, 999, 998); // 1 + 100 + 99 × 999 + 998 = 100,000
const PAST_BOUND = nestedZeros(100, 999); // 100,001
/** An object of 100 members, each a list of 999 zeros: 1 + 100 + 99,900 = 100,001. */
const PAST_BOUND_OBJECT = `{${Array.from({ length: 100 }, (_, i) => `"k${i}":[${Array(999).fill('0').join(',')}]`).join(',')}}`;

function read(body: string, chunk = 4096) {
  const bytes = Buffer.from(body);
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let i = 0; i < bytes.length; i += chunk) controller.enqueue(bytes.subarray(i, i + chunk));
      controller.close();
    },
  });
  return readJsonBody({ req: { raw: new Request('http://x/', { method: 'POST', body: stream, duplex: 'half' } as RequestInit) } }, 32 * 1024 * 1024);
}

test('a body of exactly 100,000 values passes the parser stage; 100,001 are refused 422 too_many_values, in lists or objects', async () => {
  assert.equal(MAX_JSON_VALUES, 100_000);
  const parsed = await read(AT_BOUND) as number[][];
  assert.equal(parsed.length, 100);
  for (const body of [PAST_BOUND, PAST_BOUND_OBJECT]) {
    await assert.rejects(read(body), (err: unknown) => {
      assert.ok(err instanceof ValidationError);
      assert.deepEqual(err.toJSON().detail.map((d) => [d.type, d.loc]), [['too_many_values', ['body']]]);
      return true;
    });
  }
});

test('the count is refused as the value past the bound arrives, whatever the chunking', () => {
  for (const size of [1, 7, 65_536]) {
    const guard = jsonShapeGuard();
    const bytes = Buffer.from(PAST_BOUND);
    let threwAt = -1;
    try {
      for (let i = 0; i < bytes.length; i += size) { guard(bytes.subarray(i, i + size)); threwAt = i; }
      threwAt = -1;
    } catch {
      threwAt += size;
    }
    // The 100,001st value is the very last zero: only the closing brackets follow it.
    assert.ok(threwAt >= bytes.length - size - 3, `chunks of ${size}: refused at ${threwAt} of ${bytes.length}`);
  }
  const scalar = jsonShapeGuard(undefined, undefined, 1);
  scalar(Buffer.from(' "one" '));
  assert.throws(() => jsonShapeGuard(undefined, undefined, 1)(Buffer.from('[1]')), ValidationError);
});

const post = (path: string, body: string, method = 'POST') =>
  ctx.app.request(path, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body });

test('every JSON route refuses 100,001 values in its own error shape: /v1 sends and batches, a validator-read /v1 body, /resend', async () => {
  for (const path of ['/v1/emails', '/v1/emails/batch', '/v1/templates']) {
    const res = await post(path, PAST_BOUND_OBJECT);
    assert.equal(res.status, 422, path);
    const body = await res.json() as { detail: { type: string; loc: string[] }[] };
    assert.deepEqual(body.detail.map((d) => d.type), ['too_many_values'], path);
  }
  // PATCH /v1/domains/{id} reads its body through the route's json validator, which runs before
  // the domain is looked up.
  const domain = { id: newId('domain') };
  const patched = await post(`/v1/domains/${domain.id}`, PAST_BOUND_OBJECT, 'PATCH');
  assert.equal(patched.status, 422);
  assert.deepEqual(((await patched.json()) as { detail: { type: string }[] }).detail.map((d) => d.type), ['too_many_values']);
  // A body at the bound still reaches the route's own validation.
  const atBound = await post(`/v1/domains/${domain.id}`, AT_BOUND, 'PATCH');
  assert.equal(atBound.status, 422);
  assert.notEqual(((await atBound.json()) as { detail: { type: string }[] }).detail[0]!.type, 'too_many_values');

  for (const path of ['/resend/emails', '/resend/emails/batch']) {
    const res = await post(path, PAST_BOUND_OBJECT);
    assert.equal(res.status, 422, path);
    const body = await res.json() as { name: string; message: string };
    assert.equal(body.name, 'validation_error');
    assert.match(body.message, /100000 values/);
  }
  assert.equal((await ctx.sql`select count(*)::int as n from emails`)[0]!.n, 0);
});
