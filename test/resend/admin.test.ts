import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Resend } from 'resend';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSesIdentities } from '../helpers/fake-ses-identities.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { standardWebhookHeaders } from '../../src/webhooks/sign.ts';

// CONTRACT §23.8: resend.domains, resend.apiKeys and resend.webhooks, with the official SDK
// pointed at /resend, in the shapes its own types declare, through the same services as /v1.

const ses = await startFakeSesIdentities();
after(() => ses.close());
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: ses.url, WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8', PUBLIC_BASE_URL: 'https://mailroom.example.com' } });
const server = serve({ fetch: ctx.app.fetch, hostname: '127.0.0.1', port: 0 });
await new Promise((r) => server.once('listening', r));
after(() => new Promise((r) => server.close(r)));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/resend`;
process.env.RESEND_BASE_URL = base;

const tenant = await ctx.tenant('admin');
await connectProvider(ctx.sql, ctx.config, { projectId: tenant.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'fake-secret' });
const resend = new Resend(tenant.key);
const other = await ctx.tenant('other');
await connectProvider(ctx.sql, ctx.config, { projectId: other.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'fake-secret' });
const otherResend = new Resend(other.key);

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;
const audit = async (projectId: string, action: string) =>
  ctx.sql<{ actorType: string; targetId: string; changes: Record<string, unknown> | null }[]>`
    select actor_type, target_id, changes from audit_log where project_id = ${projectId} and action = ${action} order by id`;

test('domains: create with records, get, list, update tracking, verify, remove', async () => {
  const created = await resend.domains.create({ name: 'acme-mail.example.com', customReturnPath: 'send', openTracking: true });
  assert.equal(created.error, null, JSON.stringify(created.error));
  const d = created.data!;
  assert.match(d.id, /^dom_/);
  assert.equal(d.name, 'acme-mail.example.com');
  assert.equal(d.status, 'pending');
  assert.equal(d.region, 'us-east-1');
  assert.match(d.created_at, ISO);
  assert.deepEqual(d.capabilities, { sending: 'enabled', receiving: 'disabled' });
  assert.equal(d.open_tracking, true);
  assert.equal(d.click_tracking, false);
  const tokens = ses.identity('acme-mail.example.com')!.tokens;
  assert.deepEqual(d.records.filter((r) => r.record === 'DKIM'), tokens.map((t) => ({
    record: 'DKIM', name: `${t}._domainkey`, type: 'CNAME', ttl: 'Auto', status: 'pending', value: `${t}.dkim.amazonses.com`,
  })));
  assert.deepEqual(d.records.filter((r) => r.record === 'SPF'), [
    { record: 'SPF', name: 'send', type: 'MX', ttl: 'Auto', status: 'pending', value: 'feedback-smtp.us-east-1.amazonses.com', priority: 10 },
    { record: 'SPF', name: 'send', type: 'TXT', ttl: 'Auto', status: 'pending', value: '"v=spf1 include:amazonses.com ~all"' },
  ]);
  // The same domain through /v1.
  const v1 = await (await ctx.call(tenant.key, `/v1/domains/${d.id}`)).json() as Record<string, unknown>;
  assert.equal(v1.value, 'acme-mail.example.com');
  assert.equal(v1.mail_from_status, 'pending');

  const got = await resend.domains.get(d.id);
  assert.equal(got.error, null);
  assert.equal(got.data!.object, 'domain');
  assert.equal(got.data!.id, d.id);
  assert.deepEqual(got.data!.records, d.records);

  const list = await resend.domains.list();
  assert.equal(list.data!.object, 'list');
  assert.equal(list.data!.has_more, false);
  assert.deepEqual(list.data!.data.map((x) => x.id), [d.id]);
  assert.equal(list.data!.data[0]!.status, 'pending');

  // verify asks SES now, as the worker's scheduled check does.
  ses.setStatus('acme-mail.example.com', { verification: 'SUCCESS', dkim: 'SUCCESS', mailFrom: 'SUCCESS' });
  const verified = await resend.domains.verify(d.id);
  assert.deepEqual(verified, { data: { object: 'domain', id: d.id }, error: null, headers: verified.headers });
  assert.equal((await resend.domains.get(d.id)).data!.status, 'verified');

  const updated = await resend.domains.update({ id: d.id, trackingSubdomain: 'track', clickTracking: true, openTracking: false });
  assert.deepEqual(updated.data, { object: 'domain', id: d.id });
  const after = (await resend.domains.get(d.id)).data!;
  assert.equal(after.tracking_subdomain, 'track');
  assert.equal(after.click_tracking, true);
  assert.equal(after.open_tracking, false);
  assert.ok(after.records.every((r) => r.record !== 'DKIM' || r.status === 'verified'));
  assert.deepEqual(after.records.find((r) => r.record === 'Tracking'), {
    record: 'Tracking', name: 'track', type: 'CNAME', ttl: 'Auto', status: 'not_started', value: 'mailroom.example.com',
  });
  const v1After = await (await ctx.call(tenant.key, `/v1/domains/${d.id}`)).json() as Record<string, unknown>;
  assert.equal(v1After.tracking_domain, 'track.acme-mail.example.com');

  const removed = await resend.domains.remove(d.id);
  assert.deepEqual(removed.data, { object: 'domain', id: d.id, deleted: true });
  const gone = await resend.domains.get(d.id);
  assert.equal(gone.data, null);
  assert.equal(gone.error!.name, 'not_found');
  assert.equal(gone.error!.statusCode, 404);

  // Each change is in the audit log as the key's.
  for (const action of ['domain.created', 'domain.updated', 'domain.deleted']) {
    const entries = await audit(tenant.projectId, action);
    assert.ok(entries.length >= 1 && entries.every((e) => e.actorType === 'api_key' && e.targetId === d.id), action);
  }
});

test('domains: what Mailroom cannot do is refused by name; errors in Resend\'s shape', async () => {
  const tls = await resend.domains.create({ name: 'tls.example.com', tls: 'enforced' });
  assert.equal(tls.error!.name, 'validation_error');
  assert.match(tls.error!.message, /tls/);
  const receiving = await resend.domains.create({ name: 'rx.example.com', capabilities: { receiving: 'enabled' } });
  assert.equal(receiving.error!.name, 'validation_error');
  assert.match(receiving.error!.message, /receiving/);
  assert.equal(ses.identity('tls.example.com'), undefined, 'nothing was registered with SES');

  const bad = await resend.domains.create({ name: 'not a domain' });
  assert.equal(bad.error!.name, 'validation_error');
  const made = await resend.domains.create({ name: 'twice.example.com' });
  assert.equal(made.error, null);
  const twice = await resend.domains.create({ name: 'twice.example.com' });
  assert.equal(twice.error!.name, 'validation_error');
  assert.match(twice.error!.message, /already/);
  const caps = await resend.domains.update({ id: made.data!.id, capabilities: { receiving: 'enabled' } });
  assert.equal(caps.error!.name, 'validation_error');

  for (const res of [await resend.domains.get('dom_nope'), await resend.domains.verify('dom_01ARZ3NDEKTSV4RRFFQ69G5FAV'), await resend.domains.remove('x')]) {
    assert.equal(res.error!.name, 'not_found');
    assert.equal(res.error!.statusCode, 404);
  }
  const badLimit = await resend.domains.list({ limit: 500 });
  assert.equal(badLimit.error!.name, 'validation_error');
});

test('apiKeys: create answers {id, token}; a sending_access token sends only; list; update renames; remove revokes', async () => {
  const created = await resend.apiKeys.create({ name: 'ci', permission: 'sending_access' });
  assert.equal(created.error, null, JSON.stringify(created.error));
  const { id, token } = created.data!;
  assert.match(id, /^key_/);
  assert.match(token, /^sk_[A-Za-z0-9_-]{43}$/);
  assert.deepEqual(Object.keys(created.data!).sort(), ['id', 'token']);

  const sender = new Resend(token);
  const sent = await sender.emails.send({ from: 'app@acme.test', to: 'ann@example.net', subject: 'Hi', text: 'Hi' });
  assert.equal(sent.error, null);
  for (const refused of [await sender.domains.list(), await sender.apiKeys.list(), await sender.webhooks.list(), await sender.apiKeys.create({ name: 'escalate' })]) {
    assert.equal(refused.error!.name, 'restricted_api_key');
    assert.equal(refused.error!.statusCode, 401);
  }

  const full = await resend.apiKeys.create({ name: 'admin' });
  assert.equal((await ctx.sql<[{ permission: string }]>`select permission from api_keys where id = ${full.data!.id}`)[0].permission, 'full');

  const list = await resend.apiKeys.list();
  assert.equal(list.data!.object, 'list');
  assert.equal(list.data!.has_more, false);
  const item = list.data!.data.find((k) => k.id === id)!;
  assert.deepEqual(Object.keys(item).sort(), ['created_at', 'id', 'last_used_at', 'name']);
  assert.equal(item.name, 'ci');
  assert.match(item.created_at, ISO);
  assert.match(item.last_used_at!, ISO, 'the send used it');
  const paged = await resend.apiKeys.list({ limit: 1 });
  assert.equal(paged.data!.data.length, 1);
  assert.equal(paged.data!.has_more, true);
  const next = await resend.apiKeys.list({ limit: 1, after: paged.data!.data[0]!.id });
  assert.notEqual(next.data!.data[0]!.id, paged.data!.data[0]!.id);

  const renamed = await resend.apiKeys.update(id, { name: '  new name ' });
  assert.deepEqual(renamed.data, { object: 'api_key', id });
  assert.equal((await resend.apiKeys.list()).data!.data.find((k) => k.id === id)!.name, 'new name');
  // The renamed key still works, and its rename is recorded with both names.
  assert.equal((await sender.emails.send({ from: 'app@acme.test', to: 'ann@example.net', subject: 'Hi', text: 'Hi' })).error, null);
  const renames = await audit(tenant.projectId, 'api_key.renamed');
  assert.deepEqual(renames.map((e) => [e.targetId, e.actorType, e.changes]), [[id, 'api_key', { name: 'new name', previous_name: 'ci' }]]);
  // The same name again changes nothing and records nothing; a bad name is refused.
  assert.deepEqual((await resend.apiKeys.update(id, { name: 'new name' })).data, { object: 'api_key', id });
  assert.equal((await audit(tenant.projectId, 'api_key.renamed')).length, 1);
  for (const name of ['', ' ', 'x'.repeat(201)]) assert.equal((await resend.apiKeys.update(id, { name })).error!.name, 'validation_error', JSON.stringify(name));
  assert.equal((await resend.apiKeys.update(id, {} as { name: string })).error!.name, 'validation_error');

  const removed = await resend.apiKeys.remove(id);
  assert.deepEqual(removed.data, { object: 'api_key', id, deleted: true });
  assert.equal((await resend.apiKeys.update(id, { name: 'revived' })).error!.name, 'not_found', 'a revoked key is not renamed');
  const after = await sender.emails.send({ from: 'app@acme.test', to: 'ann@example.net', subject: 'Hi', text: 'Hi' });
  assert.equal(after.error!.name, 'invalid_api_key');
  assert.ok(!(await resend.apiKeys.list()).data!.data.some((k) => k.id === id), 'a removed key is not listed');
  const created1 = await audit(tenant.projectId, 'api_key.created');
  assert.ok(created1.some((e) => e.targetId === id && e.actorType === 'api_key' && e.changes?.permission === 'sending'));
  assert.ok((await audit(tenant.projectId, 'api_key.revoked')).some((e) => e.targetId === id));

  const bad = await resend.apiKeys.create({ name: 'x', permission: 'root' as 'full_access' });
  assert.equal(bad.error!.name, 'validation_error');
  const scoped = await resend.apiKeys.create({ name: 'x', domain_id: 'domain_x' });
  assert.equal(scoped.error!.name, 'validation_error');
  assert.match(scoped.error!.message, /domain/);
  assert.equal((await resend.apiKeys.remove('key_01ARZ3NDEKTSV4RRFFQ69G5FAV')).error!.name, 'not_found');
});

test('webhooks: create answers the signing secret; get (with its secret), list, update, rotate, remove', async () => {
  const created = await resend.webhooks.create({ endpoint: 'https://127.0.0.1:9/hooks', events: ['email.sent', 'email.delivered'] });
  assert.equal(created.error, null, JSON.stringify(created.error));
  const { id, signing_secret: secret } = created.data!;
  assert.equal(created.data!.object, 'webhook');
  assert.match(id, /^wh_/);
  assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);

  const got = await resend.webhooks.get(id);
  assert.deepEqual(got.data, {
    object: 'webhook', id, created_at: got.data!.created_at, status: 'enabled', endpoint: 'https://127.0.0.1:9/hooks',
    events: ['email.sent', 'email.delivered'], signing_secret: secret,
  });
  assert.match(got.data!.created_at, ISO);

  const list = await resend.webhooks.list();
  assert.equal(list.data!.object, 'list');
  assert.deepEqual(list.data!.data, [{ id, endpoint: 'https://127.0.0.1:9/hooks', created_at: got.data!.created_at, status: 'enabled', events: ['email.sent', 'email.delivered'] }]);

  const updated = await resend.webhooks.update(id, { status: 'disabled', events: ['email.bounced'], endpoint: 'https://127.0.0.1:9/other' });
  assert.deepEqual(updated.data, { object: 'webhook', id });
  const after = (await resend.webhooks.get(id)).data!;
  assert.equal(after.status, 'disabled');
  assert.deepEqual(after.events, ['email.bounced']);
  assert.equal(after.endpoint, 'https://127.0.0.1:9/other');
  assert.equal((await resend.webhooks.update(id, { status: 'enabled' })).error, null);
  assert.equal((await resend.webhooks.get(id)).data!.status, 'enabled');

  const rotated = await resend.webhooks.rotateSigningSecret(id);
  assert.equal(rotated.data!.object, 'webhook');
  assert.equal(rotated.data!.id, id);
  assert.match(rotated.data!.signing_secret, /^whsec_/);
  assert.notEqual(rotated.data!.signing_secret, secret);
  assert.equal((await resend.webhooks.get(id)).data!.signing_secret, rotated.data!.signing_secret, 'get reads the current secret');
  // The secret it answers is the one deliveries are signed with: the SDK's own verify accepts them.
  const current = (await resend.webhooks.get(id)).data!.signing_secret;
  const payload = JSON.stringify({ id: 'evt_1', type: 'email.sent', data: {} });
  const signed = standardWebhookHeaders(current, 'evt_1', Math.floor(Date.now() / 1000), payload);
  const headers = { id: signed['webhook-id']!, timestamp: signed['webhook-timestamp']!, signature: signed['webhook-signature']! };
  assert.equal((resend.webhooks.verify({ payload, headers, webhookSecret: current }) as unknown as { id: string }).id, 'evt_1');
  const [sealed] = await ctx.sql<[{ secretEncrypted: Buffer }]>`select secret_encrypted from webhook_endpoints where id = ${id}`;
  assert.ok(!sealed.secretEncrypted.toString('latin1').includes(rotated.data!.signing_secret), 'stored sealed, not as written');

  const removed = await resend.webhooks.remove(id);
  assert.deepEqual(removed.data, { object: 'webhook', id, deleted: true });
  assert.equal((await resend.webhooks.get(id)).error!.name, 'not_found');
  for (const action of ['webhook.created', 'webhook.updated', 'webhook.secret_rotated', 'webhook.deleted']) {
    assert.ok((await audit(tenant.projectId, action)).some((e) => e.targetId === id && e.actorType === 'api_key'), action);
  }
  // No secret reaches the audit log.
  const dump = (await ctx.sql<[{ d: string }]>`select coalesce(string_agg(audit_log::text, ' '), '') as d from audit_log`)[0].d;
  assert.ok(!dump.includes(secret) && !dump.includes(rotated.data!.signing_secret));
});

test('webhooks: unknown events, refused destinations and bad updates answer validation_error', async () => {
  const unknown = await resend.webhooks.create({ endpoint: 'https://127.0.0.1:9/h', events: ['email.teleported' as 'email.sent'] });
  assert.equal(unknown.error!.name, 'validation_error');
  assert.match(unknown.error!.message, /email\.teleported/);
  const privateHost = await resend.webhooks.create({ endpoint: 'https://10.1.2.3/h', events: ['email.sent'] });
  assert.equal(privateHost.error!.name, 'validation_error');
  const plain = await resend.webhooks.create({ endpoint: 'ftp://127.0.0.1/h', events: ['email.sent'] });
  assert.equal(plain.error!.name, 'validation_error');
  const made = await resend.webhooks.create({ endpoint: 'https://127.0.0.1:9/h', events: ['email.sent'] });
  const badStatus = await resend.webhooks.update(made.data!.id, { status: 'paused' as 'enabled' });
  assert.equal(badStatus.error!.name, 'validation_error');
  const nothing = await resend.webhooks.update(made.data!.id, {});
  assert.equal(nothing.error!.name, 'validation_error');
  assert.equal((await resend.webhooks.rotateSigningSecret('wh_01ARZ3NDEKTSV4RRFFQ69G5FAV')).error!.name, 'not_found');
});

test('another project\'s domains, keys and webhooks are not found; it lists only its own', async () => {
  const d = (await resend.domains.create({ name: 'mine.example.com' })).data!;
  const w = (await resend.webhooks.create({ endpoint: 'https://127.0.0.1:9/mine', events: ['email.sent'] })).data!;
  const k = await createApiKey(ctx.sql, tenant.projectId, 'mine');
  for (const res of [
    await otherResend.domains.get(d.id), await otherResend.domains.update({ id: d.id, openTracking: true }), await otherResend.domains.verify(d.id),
    await otherResend.domains.remove(d.id), await otherResend.webhooks.get(w.id), await otherResend.webhooks.update(w.id, { status: 'disabled' }),
    await otherResend.webhooks.rotateSigningSecret(w.id), await otherResend.webhooks.remove(w.id), await otherResend.apiKeys.remove(k.id),
    await otherResend.apiKeys.update(k.id, { name: 'x' }),
  ]) {
    assert.equal(res.error?.name, 'not_found', JSON.stringify(res));
  }
  assert.deepEqual((await otherResend.domains.list()).data!.data, []);
  assert.deepEqual((await otherResend.webhooks.list()).data!.data, []);
  assert.deepEqual((await otherResend.apiKeys.list()).data!.data.map((x) => x.name), ['test key']);
  // A cursor of another project's item is not found either.
  assert.equal((await otherResend.domains.list({ after: d.id })).error!.name, 'not_found');
  // Nothing changed.
  assert.equal((await resend.domains.get(d.id)).data!.open_tracking, false);
  assert.equal((await resend.webhooks.get(w.id)).data!.status, 'enabled');
  assert.equal((await ctx.sql`select 1 from api_keys where id = ${k.id} and revoked_at is null`).length, 1);
});

test('an unknown route under /resend answers 404 in Resend\'s shape', async () => {
  for (const [method, path] of [['GET', '/nothing-here'], ['POST', '/domains/x/y/z'], ['GET', '/automations'], ['DELETE', '/api-keys']] as const) {
    const res = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${tenant.key}` } });
    assert.equal(res.status, 404, `${method} ${path}`);
    assert.deepEqual(await res.json(), { statusCode: 404, name: 'not_found', message: 'Route not found.' });
  }
  const anonymous = await fetch(`${base}/nothing-here`);
  assert.equal(anonymous.status, 401);
  assert.equal(((await anonymous.json()) as { name: string }).name, 'missing_api_key');
});
