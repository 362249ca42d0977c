import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { serve } from '@hono/node-server';
import { request } from 'undici';
import { createTestContext } from '../helpers/app.ts';
import { registry } from '../../src/platform/metrics.ts';

// EMAIL_MAX_MESSAGE_BYTES 4096 puts the readable-body bound at 2 × 4096 + 1 MiB.
const ctx = await createTestContext({ env: { EMAIL_MAX_MESSAGE_BYTES: '4096' } });
const { key } = await ctx.tenant();
const LIMIT = 2 * 4096 + 1024 * 1024;

const server = await new Promise<Server>((resolve) => {
  const s = serve({ fetch: ctx.app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s as Server));
});
after(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const emailCount = async () => (await ctx.sql`select count(*)::int as n from emails`)[0]!.n as number;

/** A JSON body that never ends on its own: `{"text":"xxxx…` produced lazily, counting what was pulled. */
function endlessBody(maxBytes: number) {
  const state = { produced: 0 };
  const chunk = Buffer.alloc(16 * 1024, 'x');
  async function* generate() {
    yield Buffer.from('{"from":"a@acme.test","to":"b@example.test","subject":"s","text":"');
    while (state.produced < maxBytes) {
      state.produced += chunk.length;
      yield chunk;
      await new Promise((r) => setImmediate(r));
    }
    yield Buffer.from('"}');
  }
  return { stream: Readable.from(generate()), state };
}

/**
 * node:http hands over the response as soon as it arrives, even mid-upload (undici reports the
 * server closing the upload as EPIPE instead); write errors after the answer are expected.
 */
function postStreaming(path: string, headers: Record<string, string>, { stream: body, state }: { stream: Readable; state: { produced: number } }) {
  return new Promise<{ status: number; headers: Record<string, unknown>; json: unknown; producedAtAnswer: number }>((resolve, reject) => {
    const req = httpRequest(`${base}${path}`, { method: 'POST', headers }, (res) => {
      const producedAtAnswer = state.produced;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        body.destroy();
        resolve({ status: res.statusCode!, headers: res.headers, json: JSON.parse(Buffer.concat(chunks).toString()), producedAtAnswer });
      });
    });
    req.on('error', (err) => setTimeout(() => reject(err), 1000));
    body.on('error', () => {});
    body.pipe(req);
  });
}

test('in process: a body over the bound is 413 payload_too_large', async () => {
  const before = await emailCount();
  const res = await ctx.app.request('/v1/emails', { method: 'POST', headers: auth, body: `{"text":"${'x'.repeat(LIMIT)}"}` });
  assert.equal(res.status, 413);
  assert.deepEqual(await res.json(), { error: { type: 'payload_too_large', message: `Request body exceeds ${LIMIT} bytes.` } });
  assert.equal(await emailCount(), before);
});

test('in process: a declared Content-Length over the bound is refused before reading', async () => {
  let pulled = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled++;
      controller.enqueue(new TextEncoder().encode('{}'));
      controller.close();
    },
  }, { highWaterMark: 0 });
  const res = await ctx.app.request('/v1/emails', {
    method: 'POST',
    headers: { ...auth, 'content-length': String(LIMIT + 1) },
    body,
    duplex: 'half',
  } as RequestInit);
  assert.equal(res.status, 413);
  assert.equal(pulled, 0);
});

test('a body just under the bound is read, and an oversized message is a 422, not a 413', async () => {
  const text = 'x'.repeat(LIMIT - 200);
  const res = await ctx.app.request('/v1/emails', { method: 'POST', headers: auth, body: JSON.stringify({ from: 'a@acme.test', to: 'b@example.test', subject: 's', text }) });
  assert.equal(res.status, 422);
  const { detail } = (await res.json()) as { detail: { type: string }[] };
  assert.equal(detail[0]!.type, 'message_too_large');
});

test('over HTTP: a chunked body without Content-Length is cut off once past the bound', async () => {
  const total = 64 * 1024 * 1024;
  const before = await emailCount();
  const started = Date.now();
  const res = await postStreaming('/v1/emails', auth, endlessBody(total));
  assert.equal(res.status, 413);
  assert.equal((res.json as { error: { type: string } }).error.type, 'payload_too_large');
  // The answer came long before the 64 MiB the client would have sent. What the client has
  // produced by then is the bound plus whatever the kernel's socket buffers took while the answer
  // was on its way: TCP autotuning sizes those by how fast the server was reading, a few MiB on
  // loopback, more on a loaded machine. So the check is against a quarter of the upload.
  assert.ok(res.producedAtAnswer < total / 4, `client had produced ${res.producedAtAnswer} bytes`);
  assert.ok(Date.now() - started < 10_000);
  assert.equal(await emailCount(), before);
});

test('over HTTP: a declared Content-Length over the bound is answered before the body is sent', async () => {
  const total = 64 * 1024 * 1024;
  const res = await postStreaming('/v1/emails', { ...auth, 'content-length': String(total) }, endlessBody(total));
  assert.equal(res.status, 413);
  // Answered from the header alone: the client had produced only what the kernel's socket
  // buffers took meanwhile (a few MiB on a loaded machine), far from the whole body.
  assert.ok(res.producedAtAnswer < total / 4, `client had produced ${res.producedAtAnswer} bytes`);
});

test('over HTTP: an unauthenticated huge body is a 401 and is not read', async () => {
  const res = await postStreaming('/v1/emails', { 'content-type': 'application/json' }, endlessBody(LIMIT * 4));
  assert.equal(res.status, 401);
  assert.ok(res.producedAtAnswer < LIMIT, `client had produced ${res.producedAtAnswer} bytes`);
});

/** How many POST /v1/emails the app has answered with `status`, from its own request counter. */
async function answered(status: number): Promise<number> {
  const metric = await registry.getSingleMetric('mailroom_http_requests_total')!.get();
  return metric.values.filter((v) => v.labels.method === 'POST' && v.labels.route === '/v1/emails' && String(v.labels.status) === String(status))
    .reduce((sum, v) => sum + v.value, 0);
}

test('over HTTP: a client that leaves mid-upload ends its request as a 422, writes nothing, and the server carries on', async () => {
  const before = { emails: await emailCount(), answered: await answered(422) };
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(['POST /v1/emails HTTP/1.1', 'host: 127.0.0.1', `authorization: ${auth.authorization}`,
    'content-type: application/json', 'content-length: 5000', '', '{"from":"a@acme.test","to":"b@'].join('\r\n'));
  await new Promise((r) => setTimeout(r, 100));
  socket.destroy();
  const deadline = Date.now() + 5_000;
  while (await answered(422) === before.answered && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.equal(await answered(422), before.answered + 1, 'the abandoned request was settled as body_incomplete');
  assert.equal(await emailCount(), before.emails);
});

test('over HTTP: a normal send still works on the same server', async () => {
  const res = await request(`${base}/v1/emails`, {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ from: 'a@acme.test', to: 'b@example.test', subject: 's', text: 'hello' }),
  });
  assert.equal(res.statusCode, 201);
  assert.equal(((await res.body.json()) as { status: string }).status, 'queued');
});
