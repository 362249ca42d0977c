import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { runCli } from '../helpers/process.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { sendingKeyMay } from '../../src/http/auth.ts';

const ctx = await createTestContext();
const { projectId, key: fullKey } = await ctx.tenant();
const sending = await createApiKey(ctx.sql, projectId, 'ci sender', 'sending');

test('a sending key sends; every other /v1 route answers 403 permission_denied', async () => {
  const sent = await ctx.call(sending.key, '/v1/emails', { method: 'POST', body: { from: 'app@acme.test', to: 'ann@example.net', subject: 'Hi', text: 'hi' } });
  assert.equal(sent.status, 201);
  const { id } = (await sent.json()) as { id: string };
  for (const [method, path] of [['GET', '/v1/emails'], ['GET', `/v1/emails/${id}`], ['GET', `/v1/emails/${id}/events`], ['GET', '/v1/api-keys'],
    ['GET', '/v1/domains'], ['GET', '/v1/webhooks'], ['GET', '/v1/sink/messages'], ['DELETE', '/v1/sink/messages'], ['GET', '/v1/suppressions'],
    ['POST', '/v1/suppressions']] as const) {
    const res = await ctx.call(sending.key, path, { method, body: method === 'POST' ? { email: 'x@example.net' } : undefined });
    assert.equal(res.status, 403, `${method} ${path}`);
    assert.equal(((await res.json()) as { error: { type: string } }).error.type, 'permission_denied');
    assert.ok(res.headers.get('x-ratelimit-limit'), 'still counted against the project');
  }
  assert.equal((await ctx.call(fullKey, `/v1/emails/${id}`)).status, 200, 'a full key reads it');
  assert.ok(sendingKeyMay('PATCH', `/v1/emails/${id}`) && sendingKeyMay('POST', `/v1/emails/${id}/cancel`) && sendingKeyMay('POST', '/v1/emails/batch'));
  assert.ok(!sendingKeyMay('GET', '/v1/emails') && !sendingKeyMay('DELETE', `/v1/emails/${id}`));
});

test('GET /v1/api-keys shows each key\'s permission; an unknown permission is refused', async () => {
  const { data } = (await (await ctx.call(fullKey, '/v1/api-keys')).json()) as { data: { id: string; permission: string }[] };
  assert.equal(data.find((k) => k.id === sending.id)?.permission, 'sending');
  assert.ok(data.filter((k) => k.id !== sending.id).every((k) => k.permission === 'full'));
  await assert.rejects(createApiKey(ctx.sql, projectId, 'x', 'admin'), /permission must be one of full, sending/);
});

test('CLI: key create --permission sending; the default is full', async () => {
  const env = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY };
  const made = await runCli(['key', 'create', '--project', projectId, '--name', 'cli sender', '--permission', 'sending'], env);
  assert.equal(made.code, 0, made.stderr);
  assert.equal(made.json().permission, 'sending');
  assert.equal((await ctx.call(made.json().key, '/v1/emails')).status, 403);
  assert.equal((await runCli(['key', 'create', '--project', projectId, '--name', 'cli full'], env)).json().permission, 'full');
  const bad = await runCli(['key', 'create', '--project', projectId, '--name', 'x', '--permission', 'root'], env);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^mailroom: permission must be one of full, sending/);
});
