import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { serve } from '@hono/node-server';
import { createTestContext } from '../helpers/app.ts';
import { topLevelArrayCounter } from '../../src/http/body.ts';

// The default message limit: bodies up to 2 × 10 MiB + 1 MiB are read, so 20 MiB is accepted
// as bytes and only the item count can refuse it.
const ctx = await createTestContext();
const { key } = await ctx.tenant();
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const emailCount = async () => (await ctx.sql`select count(*)::int as n from emails`)[0]!.n as number;

const server = await new Promise<Server>((resolve) => {
  const s = serve({ fetch: ctx.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
});
after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const valid = (i: number) => ({ from: 'a@acme.test', to: `r${i}@example.test`, subject: 's', text: 't' });

test('the array counter counts top-level elements across chunk boundaries, strings and nesting', () => {
  const count = (...chunks: string[]) => {
    const c = topLevelArrayCounter();
    let n = 0;
    for (const chunk of chunks) n = c(Buffer.from(chunk));
    return n;
  };
  assert.equal(count('[]'), 0);
  assert.equal(count(' [ {} ]'), 1);
  assert.equal(count('[{"a":"x,]\\",["}, [1,2,[3]], "s,", 4]'), 4);
  assert.equal(count('[{"a":"', ',,,', '"},', '{}', ']'), 2);
  assert.equal(count('{"a":[1,2,3]}'), 0);
  assert.equal(count('[{}', ',', '{}', ','), 2);
});

for (const [path, headers] of [
  ['/v1/emails/batch', {}],
  ['/resend/emails/batch', {}],
  ['/resend/emails/batch', { 'x-batch-validation': 'permissive' }],
] as const) {
  test(`${path} ${JSON.stringify(headers)}: 101 items are one 422 on the count, no item validated`, async () => {
    const before = await emailCount();
    // Every item is invalid: were any validated, its problem would show in the answer.
    const res = await ctx.call(key, path, { method: 'POST', body: Array.from({ length: 101 }, () => ({})), headers });
    assert.equal(res.status, 422);
    const body = await res.json() as Record<string, unknown>;
    const text = JSON.stringify(body);
    assert.match(text, /1 to 100/);
    assert.doesNotMatch(text, /\bfrom\b|\bto\b.*required|subject/);
    if (path.startsWith('/v1')) {
      assert.deepEqual(body, { detail: [{ loc: ['body'], msg: 'A batch holds 1 to 100 emails', type: 'too_long', ctx: { min_length: 1, max_length: 100 } }] });
    }
    assert.equal(await emailCount(), before);
  });

  test(`${path} ${JSON.stringify(headers)}: exactly 100 valid items are still accepted`, async () => {
    const res = await ctx.call(key, path, { method: 'POST', body: Array.from({ length: 100 }, (_, i) => valid(i)), headers });
    assert.ok(res.status === 200 || res.status === 201, `status ${res.status}`);
  });
}

/** Posts a streamed body over HTTP, answering when the server answers (even mid-upload). */
function postStream(path: string, headers: Record<string, string>, body: Readable, state: { produced: number }) {
  return new Promise<{ status: number; json: unknown; producedAtAnswer: number }>((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: 'POST', headers }, (res) => {
      const producedAtAnswer = state.produced;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        body.destroy();
        resolve({ status: res.statusCode!, json: JSON.parse(Buffer.concat(chunks).toString()), producedAtAnswer });
      });
    });
    req.setTimeout(20_000, () => req.destroy(new Error('no answer within 20 s')));
    req.on('error', (err) => setTimeout(() => reject(err), 1000));
    body.on('error', () => {});
    body.pipe(req);
  });
}

test('a 20 MiB permissive batch of {} is refused while /healthz answers within 100 ms', async () => {
  const total = 20 * 1024 * 1024;
  // `[{},{},…]`: about seven million items, sent with its length declared, as a client would.
  const unit = Buffer.from('{},'.repeat(16 * 1024));
  const count = Math.floor((total - 2) / unit.length);
  const length = 1 + count * unit.length + 2;
  const state = { produced: 0 };
  async function* generate() {
    yield Buffer.from('[');
    state.produced = 1;
    for (let i = 0; i < count; i++) {
      state.produced += unit.length;
      yield unit;
    }
    yield Buffer.from('{}]');
  }

  // Pings /healthz on its own connection every 10 ms, keeping the worst round trip.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  let worst = 0;
  let pings = 0;
  let stop = false;
  const ping = () => new Promise<void>((resolve, reject) => {
    const started = performance.now();
    httpRequest(`${base}/healthz`, { agent }, (res) => {
      res.resume();
      res.on('end', () => { worst = Math.max(worst, performance.now() - started); pings++; resolve(); });
    }).on('error', reject).end();
  });
  await ping();
  worst = 0;
  pings = 0;
  const pinger = (async () => {
    while (!stop) {
      await ping();
      await new Promise((r) => setTimeout(r, 10));
    }
  })();

  const before = await emailCount();
  const started = performance.now();
  const res = await postStream('/resend/emails/batch', { ...auth, 'x-batch-validation': 'permissive', 'content-length': String(length) }, Readable.from(generate()), state);
  const elapsed = performance.now() - started;
  // Keep pinging a moment after the answer: the server may still be discarding the upload.
  await new Promise((r) => setTimeout(r, 300));
  stop = true;
  await pinger;
  agent.destroy();

  assert.equal(res.status, 422);
  assert.match(JSON.stringify(res.json), /1 to 100/);
  assert.equal(await emailCount(), before);
  console.log(JSON.stringify({ healthz_worst_ms: Number(worst.toFixed(1)), pings, answer_ms: Number(elapsed.toFixed(1)), produced_at_answer: res.producedAtAnswer }));
  assert.ok(pings >= 3, `only ${pings} pings completed`);
  assert.ok(worst < 100, `/healthz took ${worst.toFixed(1)} ms at worst`);
  // Refused on the count, not after reading the whole body.
  assert.ok(res.producedAtAnswer < total / 2, `client had produced ${res.producedAtAnswer} bytes`);
});

test('more than 50 custom headers or 50 attachments is a 422 at that field', async () => {
  const headers = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-Custom-${i}`, 'v']));
  let res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid(0), headers } });
  assert.equal(res.status, 422);
  let { detail } = await res.json() as { detail: { loc: unknown[]; type: string; ctx?: Record<string, unknown> }[] };
  assert.deepEqual(detail.map((d) => [d.loc, d.type]), [[['body', 'headers'], 'too_long']]);
  assert.equal(detail[0]!.ctx?.max_length, 50);

  const attachments = Array.from({ length: 51 }, (_, i) => ({ filename: `f${i}.txt`, content: 'aGk=' }));
  res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid(0), attachments } });
  assert.equal(res.status, 422);
  ({ detail } = await res.json() as { detail: typeof detail });
  assert.deepEqual(detail.map((d) => [d.loc, d.type]), [[['body', 'attachments'], 'too_long']]);

  // In a batch the loc carries the item's index.
  res = await ctx.call(key, '/v1/emails/batch', { method: 'POST', body: [valid(0), { ...valid(1), headers }] });
  assert.equal(res.status, 422);
  ({ detail } = await res.json() as { detail: typeof detail });
  assert.deepEqual(detail.map((d) => d.loc), [['body', 1, 'headers']]);

  // Exactly 50 of each is accepted.
  res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { ...valid(0), headers: Object.fromEntries(Object.entries(headers).slice(0, 50)), attachments: attachments.slice(0, 50) } });
  assert.equal(res.status, 201);
});
