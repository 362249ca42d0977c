import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect as netConnect } from 'node:net';
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

/**
 * Posts `body` over a raw connection in 64 KiB chunks with its length declared, and stops sending
 * as soon as an answer starts to arrive; answers the status and the answer's body. A raw socket
 * keeps what was read even if the server closes while this side still writes.
 */
function post(path: string, body: Buffer) {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const socket = netConnect({ host: hostname, port: Number(port) });
    let read = '';
    let answered = false;
    const finish = () => {
      const m = /^HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n([^]*)$/.exec(read);
      if (!m) return reject(new Error(`no answer: ${read.slice(0, 200)}`));
      resolve({ status: Number(m[1]), text: m[2]! });
    };
    socket.on('data', (d: Buffer) => {
      read += d.toString('utf8');
      answered = true;
      const head = read.indexOf('\r\n\r\n');
      const length = /\r\ncontent-length: (\d+)/i.exec(read.slice(0, head))?.[1];
      if (head >= 0 && length !== undefined && Buffer.byteLength(read.slice(head + 4)) >= Number(length)) {
        socket.destroy();
        finish();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => { if (read) finish(); else reject(new Error('closed without an answer')); });
    socket.setTimeout(60_000, () => socket.destroy());
    socket.once('connect', async () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      for (let i = 0; i < body.length && !answered && !socket.destroyed; i += 65_536) {
        if (!socket.write(body.subarray(i, i + 65_536))) await new Promise((r) => socket.once('drain', r).once('close', r));
      }
    });
  });
}

for (const [path, body, shape] of [
  ['/v1/emails', asObject, 'detail'],
  ['/v1/emails', asList, 'detail'],
  ['/v1/emails/batch', asObject, 'detail'],
  ['/resend/emails', asObject, 'resend'],
] as const) {
  test(`POST ${path} with a million small lists (${(body.length / 1048576).toFixed(1)} MiB, ${body[0] === 0x7b ? 'an object' : 'a list'}) is refused while /healthz answers within 250 ms`, { timeout: 120_000 }, async () => {
    const m = await withinBudget(5, 250, () => whileProbing(url, `POST ${path}: a million small lists`, () => post(path, body), { pid: api.child.pid! }));
    assert.ok([413, 422].includes(m.result.status), `${m.result.status}: ${m.result.text.slice(0, 200)}`);
    if (shape === 'detail') assert.equal((JSON.parse(m.result.text) as { detail: { type: string }[] }).detail[0]!.type, 'too_many_values');
    else assert.match(m.result.text, /100000 values/);
    assert.ok(m.probes > 0);
    assert.ok(m.worst <= 250, `a /healthz probe waited ${m.worst.toFixed(0)} ms`);
  });
}
