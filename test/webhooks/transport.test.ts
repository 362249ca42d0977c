import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { testConfig } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { createWebhookTransport, RESPONSE_BODY_LIMIT } from '../../src/webhooks/transport.ts';

const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
// No database is touched; the config only carries the destination rules.
const config = testConfig('postgres://unused/unused', { WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' });
const transport = createWebhookTransport(config, { ca: tls.cert, timeoutMs: 1500 });
const untrusting = createWebhookTransport(config, { timeoutMs: 1500 });
after(async () => { await transport.close(); await untrusting.close(); });

test('a text body is captured up to 4096 bytes, and no more is read', async () => {
  receiver.respond((_req, res) => {
    res.writeHead(500, { 'content-type': 'text/html; charset=utf-8' });
    // Far more than the limit, then the response never ends: reading it all would time out.
    res.write('x'.repeat(RESPONSE_BODY_LIMIT * 4));
  });
  const started = Date.now();
  const result = await transport.post(receiver.url('/big'), '{}', {});
  assert.equal(result.responseStatus, 500);
  assert.equal(result.error, null);
  assert.equal(result.responseBody, 'x'.repeat(RESPONSE_BODY_LIMIT));
  assert.ok(Date.now() - started < 1000, 'stopped reading at the limit instead of waiting for the end');
});

test('bodies of other content types are not kept', async () => {
  receiver.respond((_req, res) => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.alloc(10_000, 1)));
  assert.deepEqual(await transport.post(receiver.url('/bin'), '{}', {}), { responseStatus: 200, responseBody: null, retryAfter: null, error: null });
  receiver.respond((_req, res) => res.writeHead(200, { 'content-type': 'application/vnd.api+json' }).end('{"ok":true}\u0000'));
  assert.equal((await transport.post(receiver.url('/json'), '{}', {})).responseBody, '{"ok":true}', 'JSON kept, NUL dropped');
});

test('a redirect comes back as it is, unfollowed', async () => {
  receiver.respond((req, res) => (req.path === '/from' ? res.writeHead(307, { location: receiver.url('/to') }).end() : res.writeHead(200).end()));
  const before = receiver.requests.length;
  const result = await transport.post(receiver.url('/from'), '{}', {});
  assert.equal(result.responseStatus, 307);
  assert.equal(receiver.requests.length, before + 1);
  assert.equal(receiver.requests.at(-1)!.path, '/from');
});

test('network failures become timeout, connection_refused, connection_reset, tls_error', async () => {
  receiver.respond(() => {});
  assert.equal((await transport.post(receiver.url('/hang'), '{}', {})).error, 'timeout');

  receiver.respond((_req, res) => res.socket!.destroy());
  assert.equal((await transport.post(receiver.url('/reset'), '{}', {})).error, 'connection_reset');

  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  assert.deepEqual(await transport.post(`https://127.0.0.1:${port}/`, '{}', {}), { responseStatus: null, responseBody: null, retryAfter: null, error: 'connection_refused' });

  receiver.respond((_req, res) => res.writeHead(200).end());
  assert.equal((await untrusting.post(receiver.url('/tls'), '{}', {})).error, 'tls_error', 'an untrusted certificate is refused');
});
