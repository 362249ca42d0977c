import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase } from '../helpers/db.ts';
import { COMMITTED_MIGRATIONS, runCli } from '../helpers/process.ts';
import { TEST_SECRET_KEY, createTestContext } from '../helpers/app.ts';
import { getProviderConnection } from '../../src/providers/connections.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';

const ctx = await createTestContext();
const ses = await startFakeSes();
ses.quota.maxSendRate = 14;
ses.quota.max24HourSend = 50000;
const env = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, AWS_ENDPOINT_URL_SESV2: ses.url };

test('migrate on an empty database, then again: {"applied": n}', async () => {
  const { url } = await createTestDatabase({ empty: true });
  const first = await runCli(['migrate'], { ...env, DATABASE_URL: url });
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(first.json(), { applied: COMMITTED_MIGRATIONS });
  assert.deepEqual((await runCli(['migrate'], { ...env, DATABASE_URL: url })).json(), { applied: 0 });
});

test('project create, key create (works against the API), key revoke', async () => {
  const project = await runCli(['project', 'create', '--name', 'Acme'], env);
  assert.equal(project.code, 0, project.stderr);
  const p = project.json();
  assert.match(p.id, /^proj_[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.equal(p.name, 'Acme');

  const key = await runCli(['key', 'create', '--project', p.id, '--name', 'ci'], env);
  const k = key.json();
  assert.match(k.id, /^key_[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.match(k.key, /^sk_[A-Za-z0-9_-]{43}$/);
  assert.equal(k.key_prefix, k.key.slice(0, 12));
  for (const route of ['/v1/emails', '/v1/domains', '/v1/api-keys', '/v1/webhooks']) {
    assert.equal((await ctx.call(k.key, route)).status, 200, route);
  }

  const revoked = await runCli(['key', 'revoke', k.id], env);
  assert.equal(revoked.code, 0, revoked.stderr);
  assert.equal(revoked.json().id, k.id);
  assert.ok(Date.parse(revoked.json().revoked_at));
  assert.equal((await ctx.call(k.key, '/v1/emails')).status, 401);
});

test('provider connect stores the secret encrypted; disconnect removes it', async () => {
  const p = (await runCli(['project', 'create', '--name', 'ses'], env)).json();
  const out = await runCli(['provider', 'connect', '--project', p.id, '--region', 'eu-west-1', '--access-key-id', 'AKIAEXAMPLE', '--secret-access-key', 'very-secret-value', '--configuration-set', 'mailroom'], env);
  assert.equal(out.code, 0, out.stderr);
  assert.deepEqual(out.json(), { project: p.id, provider: 'ses', region: 'eu-west-1', max_send_rate: 14, max_24_hour_send: 50000 });
  const [quota] = await ctx.sql`
    select a.max_send_rate, a.max_24_hour_send, pc.rate_cap, a.quota_checked_at
    from provider_connections pc join ses_accounts a on a.id = pc.ses_account_id where pc.project_id = ${p.id}`;
  assert.equal(quota!.maxSendRate, 14);
  assert.equal(quota!.max24HourSend, 50000);
  assert.equal(quota!.rateCap, null);
  assert.ok(quota!.quotaCheckedAt);
  const capped = await runCli(['provider', 'connect', '--project', p.id, '--region', 'eu-west-1', '--access-key-id', 'AKIAEXAMPLE', '--secret-access-key', 'very-secret-value', '--configuration-set', 'mailroom', '--max-send-rate', '5'], env);
  assert.equal(capped.json().max_send_rate, 5, 'the cap is lower than the account rate');
  const [row] = await ctx.sql`select secret_access_key_encrypted from provider_connections where project_id = ${p.id}`;
  assert.ok(!row!.secretAccessKeyEncrypted.toString('latin1').includes('very-secret-value'), 'encrypted at rest');
  const conn = await getProviderConnection(ctx.sql, ctx.config, p.id);
  assert.equal(conn?.secretAccessKey, 'very-secret-value');
  assert.equal(conn?.configurationSet, 'mailroom');
  assert.deepEqual((await runCli(['provider', 'disconnect', '--project', p.id], env)).json(), { project: p.id, provider: null });
  assert.equal(await getProviderConnection(ctx.sql, ctx.config, p.id), undefined);
});

test('errors: one line on stderr, exit 1, nothing on stdout', async () => {
  for (const args of [
    ['nope'],
    ['project', 'create'],
    ['key', 'create', '--project', 'proj_missing', '--name', 'x'],
    ['key', 'revoke', 'key_missing'],
    ['project', 'create', '--name', 'x', '--bogus'],
    ['provider', 'connect', '--project', 'proj_x', '--region', 'mars', '--access-key-id', 'a', '--secret-access-key', 'b'],
    ['provider', 'connect', '--project', 'proj_x', '--region', 'eu-west-1', '--access-key-id', 'a', '--secret-access-key', 'b', '--max-send-rate', 'fast'],
  ]) {
    const r = await runCli(args, env);
    assert.equal(r.code, 1, args.join(' '));
    assert.equal(r.stdout, '');
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    assert.match(r.stderr, /^mailroom: /);
  }
});

test('provider connect refuses keys SES does not accept, and stores nothing', async () => {
  const p = (await runCli(['project', 'create', '--name', 'bad keys'], env)).json();
  const r = await runCli(['provider', 'connect', '--project', p.id, '--region', 'eu-west-1', '--access-key-id', 'a', '--secret-access-key', 'b'],
    { ...env, AWS_ENDPOINT_URL_SESV2: 'http://127.0.0.1:9' });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^mailroom: SES GetAccount failed .*ses:GetAccount/);
  assert.equal(await getProviderConnection(ctx.sql, ctx.config, p.id), undefined);
});
