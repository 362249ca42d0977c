import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, testConfig } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { waitFor } from '../helpers/wait.ts';
import { newId } from '../../src/platform/ids.ts';
import { blockedReason, checkDestination, destinationPolicy } from '../../src/webhooks/destination.ts';
import { sealSecret } from '../../src/webhooks/secret.ts';
import { insertEndpoint } from '../../src/webhooks/queries.ts';
import { createEndpoint, updateEndpoint } from '../../src/webhooks/service.ts';
import { createWebhookTransport } from '../../src/webhooks/transport.ts';
import { deliveriesFor, emitEvent, fakeDns, webhookWorker } from './helpers.ts';

const worker = webhookWorker();
// Production rules: no allowed ranges, not development.
const ctx = await createTestContext({ env: { WEBHOOK_RETRY_BASE_MS: '20' } });
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
const dns = fakeDns({
  'public.hooks.test': ['93.184.216.34'],
  'localhost.hooks.test': ['127.0.0.1'],
  'metadata.hooks.test': ['169.254.169.254'],
  'internal.hooks.test': ['10.1.2.3'],
  'cgnat.hooks.test': ['100.100.1.1'],
  'v6-loopback.hooks.test': ['::1'],
  'v6-ula.hooks.test': ['fd00:ec2::254'],
  'mapped.hooks.test': ['::ffff:192.168.0.1'],
  'nat64.hooks.test': ['64:ff9b::a00:1'],
  'mixed.hooks.test': ['93.184.216.34', '10.0.0.1'],
});
await worker.start(ctx.config, ctx.sql, { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 });
const strict = destinationPolicy(ctx.config);
const port = receiver.port;

/** Destinations the rules refuse; literal addresses (odd spellings too) and names resolving to them. */
const FORBIDDEN = [
  `https://127.0.0.1:${port}/`, `https://127.255.255.254:${port}/`, `https://10.0.0.1:${port}/`,
  `https://172.16.5.4:${port}/`, `https://192.168.1.1:${port}/`, `https://169.254.169.254:${port}/latest/meta-data`,
  `https://100.64.0.1:${port}/`, `https://0.0.0.0:${port}/`, `https://255.255.255.255:${port}/`,
  `https://224.0.0.1:${port}/`, `https://240.0.0.1:${port}/`, `https://192.0.2.10:${port}/`, `https://198.18.0.1:${port}/`,
  `https://2130706433:${port}/`, `https://0x7f.1:${port}/`, `https://127.1:${port}/`,
  `https://[::1]:${port}/`, `https://[::]:${port}/`, `https://[fe80::1]:${port}/`, `https://[fc00::1]:${port}/`,
  `https://[fd12:3456::1]:${port}/`, `https://[ff02::1]:${port}/`, `https://[fec0::1]:${port}/`,
  `https://[::ffff:127.0.0.1]:${port}/`, `https://[::ffff:a9fe:a9fe]:${port}/`, `https://[::ffff:10.0.0.1]:${port}/`,
  `https://[64:ff9b::7f00:1]:${port}/`, `https://[64:ff9b::a9fe:a9fe]:${port}/`, `https://[64:ff9b:1::1]:${port}/`,
  `https://[2002:7f00:1::1]:${port}/`, `https://[2002:c0a8:101::1]:${port}/`, `https://[::127.0.0.1]:${port}/`,
  `https://[2001:db8::1]:${port}/`,
  `https://localhost.hooks.test:${port}/`, `https://metadata.hooks.test:${port}/`, `https://internal.hooks.test:${port}/`,
  `https://cgnat.hooks.test:${port}/`, `https://v6-loopback.hooks.test:${port}/`, `https://v6-ula.hooks.test:${port}/`,
  `https://mapped.hooks.test:${port}/`, `https://nat64.hooks.test:${port}/`, `https://mixed.hooks.test:${port}/`,
];

test('the address rules: special ranges and their IPv6 wrappings are refused, public ones pass', () => {
  for (const address of ['127.0.0.1', '10.9.9.9', '169.254.1.1', '100.127.255.255', '::1', 'fe80::1', 'fdff::1', '::ffff:172.31.0.1', '64:ff9b::c0a8:1', '2002:a00:1::', '::10.0.0.1']) {
    assert.ok(blockedReason(address, strict), `${address} is refused`);
  }
  for (const address of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1']) {
    assert.equal(blockedReason(address, strict), undefined, `${address} is allowed`);
  }
  assert.match(blockedReason('::ffff:127.0.0.1', strict)!, /loopback/);
  assert.match(blockedReason('100.64.0.1', strict)!, /carrier-grade NAT/);
});

test(`${FORBIDDEN.length} forbidden destinations are refused at registration`, async () => {
  assert.ok(FORBIDDEN.length >= 25);
  const { projectId } = await ctx.tenant();
  for (const url of FORBIDDEN) {
    await assert.rejects(createEndpoint(ctx.sql, ctx.config, projectId, url, { resolve: dns.resolve }), /not allowed/, url);
  }
  const [{ count }] = await ctx.sql<[{ count: number }]>`select count(*)::int from webhook_endpoints where project_id = ${projectId}`;
  assert.equal(count, 0, 'nothing was stored');
});

test('URLs that are not https, or unreadable, are refused', async () => {
  const { projectId } = await ctx.tenant();
  for (const [url, message] of [
    ['http://public.hooks.test/hook', /must use https/],
    ['ftp://public.hooks.test/', /must use https/],
    ['not a url', /not a valid absolute URL/],
    ['https://user:pass@public.hooks.test/', /username or password/],
    [`https://public.hooks.test/${'a'.repeat(2100)}`, /1 to 2048/],
    ['https://unknown-name.hooks.test/', /does not resolve/],
  ] as const) {
    await assert.rejects(createEndpoint(ctx.sql, ctx.config, projectId, url, { resolve: dns.resolve }), message, url);
  }
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, projectId, 'https://public.hooks.test/hook', { resolve: dns.resolve });
  await assert.rejects(updateEndpoint(ctx.sql, ctx.config, projectId, endpoint.id, { url: `https://internal.hooks.test/` }, { resolve: dns.resolve }), /not allowed/);
  const [row] = await ctx.sql`select url from webhook_endpoints where id = ${endpoint.id}`;
  assert.equal(row!.url, 'https://public.hooks.test/hook', 'a refused edit changes nothing');
});

test('forbidden destinations are refused again at delivery, before anything connects', async () => {
  const { projectId } = await ctx.tenant();
  // Stored as if registered before the address changed: delivery must not trust registration.
  const ids: string[] = [];
  for (const url of FORBIDDEN) {
    const row = await insertEndpoint(ctx.sql, { id: newId('webhook'), projectId, url, secretSealed: sealSecret(ctx.config, 'whsec_test') });
    ids.push(row.id);
  }
  await emitEvent(ctx.sql, projectId);
  const rows = await waitFor('every delivery to settle', async () => {
    const all = (await Promise.all(ids.map((id) => deliveriesFor(ctx.sql, id)))).flat();
    return all.length === ids.length && all.every((r) => r.status !== 'pending') && all;
  }, 30_000);
  for (const row of rows) {
    assert.deepEqual([row.status, row.error, row.responseStatus, row.attemptCount], ['failed', 'destination_blocked', null, 1]);
  }
  assert.equal(receiver.connections(), 0, 'no connection reached the receiver');
});

test('DNS rebinding: public at registration, loopback at delivery, is blocked inside the connection', async () => {
  const { projectId } = await ctx.tenant();
  dns.set('rebind.hooks.test', '93.184.216.34');
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, projectId, `https://rebind.hooks.test:${port}/hook`, { resolve: dns.resolve });
  dns.set('rebind.hooks.test', '127.0.0.1');
  await emitEvent(ctx.sql, projectId);
  const [row] = await waitFor('the delivery to settle', async () => {
    const r = await deliveriesFor(ctx.sql, endpoint.id);
    return r[0]?.status === 'failed' && r;
  });
  assert.equal(row!.error, 'destination_blocked');
  assert.equal(row!.responseStatus, null);
  assert.equal(receiver.connections(), 0);
  assert.equal(receiver.requests.length, 0);
});

test('WEBHOOK_ALLOWED_CIDRS lets a range through, and development mode relaxes the rules', async () => {
  const allowed = testConfig(ctx.url, { WEBHOOK_ALLOWED_CIDRS: '10.0.0.0/8, 127.0.0.0/8' });
  const { projectId } = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, allowed, projectId, `https://internal.hooks.test:${port}/`, { resolve: dns.resolve });
  assert.equal(endpoint.status, 'active');
  await assert.rejects(createEndpoint(ctx.sql, allowed, projectId, `https://192.168.1.1/`), /not allowed/, 'only the listed ranges');
  assert.equal(await checkDestination('https://[::ffff:127.0.0.1]/', destinationPolicy(allowed)), 'https://[::ffff:7f00:1]/');

  // At delivery the allowed range connects; the same URL under the strict rules does not.
  const through = createWebhookTransport(allowed, { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 });
  const blocked = createWebhookTransport(ctx.config, { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 });
  try {
    const url = `https://localhost.hooks.test:${port}/allowed`;
    assert.equal((await blocked.post(url, '{}', {})).error, 'destination_blocked');
    assert.equal(receiver.connections(), 0);
    const res = await through.post(url, '{}', {});
    assert.deepEqual([res.responseStatus, res.error], [200, null]);
    assert.equal(receiver.requests.at(-1)!.path, '/allowed');
  } finally {
    await through.close();
    await blocked.close();
  }

  const dev = testConfig(ctx.url, { NODE_ENV: 'development' });
  const local = await createEndpoint(ctx.sql, dev, projectId, 'http://localhost.hooks.test:3000/hook', { resolve: dns.resolve });
  assert.equal(local.endpoint.url, 'http://localhost.hooks.test:3000/hook');
});
