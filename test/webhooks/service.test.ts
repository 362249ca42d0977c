import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { createEndpoint, getEndpointSecret, rotateEndpointSecret, updateEndpoint } from '../../src/webhooks/service.ts';
import { fakeDns } from './helpers.ts';

const ctx = await createTestContext();
const dns = fakeDns({ 'a.hooks.test': ['93.184.216.34'], 'b.hooks.test': ['2606:2800:220:1::1'] });
const opts = { resolve: dns.resolve };

test('createEndpoint stores an active endpoint with a sealed whsec_ secret', async () => {
  const { projectId } = await ctx.tenant();
  const { endpoint, secret } = await createEndpoint(ctx.sql, ctx.config, projectId, ' https://a.hooks.test/hook ', opts);
  assert.match(endpoint.id, /^wh_[0-9A-Z]{26}$/);
  assert.equal(endpoint.url, 'https://a.hooks.test/hook');
  assert.equal(endpoint.status, 'active');
  assert.equal(endpoint.consecutiveFailures, 0);
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  const [row] = await ctx.sql<[{ secretEncrypted: Buffer }]>`select secret_encrypted from webhook_endpoints where id = ${endpoint.id}`;
  assert.ok(!row.secretEncrypted.toString('latin1').includes(secret.slice(6)), 'never stored in the clear');
  assert.equal(await getEndpointSecret(ctx.sql, ctx.config, projectId, endpoint.id), secret);
  await assert.rejects(createEndpoint(ctx.sql, ctx.config, 'proj_missing', 'https://a.hooks.test/', opts), /project proj_missing not found/);
});

test('a URL edit passes the rules, clears failures, keeps the secret and the status', async () => {
  const { projectId } = await ctx.tenant();
  const { endpoint, secret } = await createEndpoint(ctx.sql, ctx.config, projectId, 'https://a.hooks.test/hook', opts);
  await ctx.sql`update webhook_endpoints set status = 'disabled_after_failures', consecutive_failures = 10 where id = ${endpoint.id}`;
  const edited = await updateEndpoint(ctx.sql, ctx.config, projectId, endpoint.id, { url: 'https://b.hooks.test/v2' }, opts);
  assert.equal(edited.url, 'https://b.hooks.test/v2');
  assert.equal(edited.consecutiveFailures, 0);
  assert.equal(edited.status, 'disabled_after_failures', 'a disabled endpoint stays disabled');
  assert.equal(await getEndpointSecret(ctx.sql, ctx.config, projectId, endpoint.id), secret);
});

test('enable resets the count; disable is disabled_by_user; the CLI form finds the project itself', async () => {
  const { projectId } = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, projectId, 'https://a.hooks.test/hook', opts);
  await ctx.sql`update webhook_endpoints set consecutive_failures = 4 where id = ${endpoint.id}`;
  const off = await updateEndpoint(ctx.sql, ctx.config, undefined, endpoint.id, { enabled: false });
  assert.deepEqual([off.status, off.consecutiveFailures], ['disabled_by_user', 4]);
  const on = await updateEndpoint(ctx.sql, ctx.config, projectId, endpoint.id, { enabled: true });
  assert.deepEqual([on.status, on.consecutiveFailures], ['active', 0]);
  await assert.rejects(updateEndpoint(ctx.sql, ctx.config, projectId, endpoint.id, {}), /nothing to change/);
});

test('another project cannot edit or read an endpoint', async () => {
  const owner = await ctx.tenant();
  const other = await ctx.tenant();
  const { endpoint } = await createEndpoint(ctx.sql, ctx.config, owner.projectId, 'https://a.hooks.test/hook', opts);
  await assert.rejects(updateEndpoint(ctx.sql, ctx.config, other.projectId, endpoint.id, { enabled: false }), /not found/);
  await assert.rejects(getEndpointSecret(ctx.sql, ctx.config, other.projectId, endpoint.id), /not found/);
  await assert.rejects(updateEndpoint(ctx.sql, ctx.config, undefined, 'wh_nope', { enabled: false }), /not found/);
  const [row] = await ctx.sql`select status from webhook_endpoints where id = ${endpoint.id}`;
  assert.equal(row!.status, 'active');
});

test('rotating the secret puts a new sealed whsec_ secret in place, in the endpoint\'s project only', async () => {
  const { projectId } = await ctx.tenant();
  const other = await ctx.tenant();
  const { endpoint, secret } = await createEndpoint(ctx.sql, ctx.config, projectId, 'https://a.hooks.test/hook', opts);
  const rotated = await rotateEndpointSecret(ctx.sql, ctx.config, projectId, endpoint.id);
  assert.match(rotated.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
  assert.notEqual(rotated.secret, secret);
  assert.equal(rotated.endpoint.id, endpoint.id);
  assert.equal(await getEndpointSecret(ctx.sql, ctx.config, projectId, endpoint.id), rotated.secret);
  const again = await rotateEndpointSecret(ctx.sql, ctx.config, undefined, endpoint.id);
  assert.equal(await getEndpointSecret(ctx.sql, ctx.config, projectId, endpoint.id), again.secret, 'the CLI form finds the project itself');
  await assert.rejects(rotateEndpointSecret(ctx.sql, ctx.config, other.projectId, endpoint.id), /not found/);
  await assert.rejects(rotateEndpointSecret(ctx.sql, ctx.config, undefined, 'wh_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z'), /not found/);
  assert.equal(await getEndpointSecret(ctx.sql, ctx.config, projectId, endpoint.id), again.secret);
});
