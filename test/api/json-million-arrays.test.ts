import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { Readable } from 'node:stream';
import { createTestContext } from '../helpers/app.ts';
import { spawnApi, whileProbing, withinBudget } from '../helpers/responsiveness.ts';

// §22.7: a 20 MiB body of a million small lists, none over 1,000 entries, is refused on its value
// count as it streams in, while /healthz on the same API answers every probe within 250 ms.

const ctx = await createTestContext();
const { key } = await ctx.tenant();
const { api, url } = await spawnApi(ctx.url, { API_RATE_LIMIT_PER_MINUTE: '100000' });

/** 1,000 lists of 1,000 lists of nine digits: a million small lists, about 20 MB. */
function millionArrays(open: string, close: string): Buffer {
  const small = '[1,2,3,4,5,6,7,8,9]';
  const middle = `[${Array(1000).fill(small).join(',')}]`;
  return Buffer.from(`${open}${Array.from({ length: 1000 }, (_, i) => (open === '{' ? `"k${i}":${middle}` : middle)).join(',')}${close}`);
}
const asList = millionArrays('[', ']');
const asObject = millionArrays('{', '}'); // a batch body that is no list is still counted

// Each route answers once first, so what is measured is the refusal, not the first request's loading.
for (const path of ['/v1/emails', '/v1/emails/batch', '/resend/emails']) {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: '{"a":[[1]]}' });
  assert.equal(res.status, 422);
  await res.arrayBuffer();
}

/** Posts `body` in 64 KiB chunks with its length declared; answers when the server answers, even mid-upload. */
function post(path: string, body: Buffer) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const chunks = Array.from({ length: Math.ceil(body.length / 65_536) }, (_, i) => body.subarray(i * 65_536, (i + 1) * 65_536));
    const stream = Readable.from(chunks);
    const req = httpRequest(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': String(body.length) },
    }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => { stream.destroy(); resolve({ status: res.statusCode!, text }); });
    });
    req.setTimeout(60_000, () => req.destroy(new Error('no answer within 60 s')));
    // The server may close once it has answered; the answer is what counts.
    req.on('error', (err) => setTimeout(() => reject(err), 1000));
    stream.on('error', () => {});
    stream.pipe(req);
  });
}

for (const [path, body, shape] of [
  ['/v1/emails', asObject, 'detail'],
  ['/v1/emails', asList, 'detail'],
  ['/v1/emails/batch', asObject, 'detail'],
  ['/resend/emails', asObject, 'resend'],
] as const) {
  test(`POST ${path} with a million small lists (${(body.length / 1048576).toFixed(1)} MiB, ${body[0] === 0x7b ? 'an object' : 'a list'}) is refused while /healthz answers within 250 ms`, { timeout: 120_000 }, async () => {
    const m = await withinBudget(3, 250, () => whileProbing(url, api.child.pid!, `POST ${path}: a million small lists`, () => post(path, body)));
    assert.ok([413, 422].includes(m.result.status), `${m.result.status}: ${m.result.text.slice(0, 200)}`);
    if (shape === 'detail') assert.equal((JSON.parse(m.result.text) as { detail: { type: string }[] }).detail[0]!.type, 'too_many_values');
    else assert.match(m.result.text, /100000 values/);
    assert.ok(m.probes > 0);
    assert.ok(m.worst <= 250, `a /healthz probe waited ${m.worst.toFixed(0)} ms`);
  });
}
