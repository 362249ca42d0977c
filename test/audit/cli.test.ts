import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../helpers/process.ts';
import { TEST_SECRET_KEY, createTestContext } from '../helpers/app.ts';
import { startFakeSes } from '../helpers/fake-ses.ts';

const ctx = await createTestContext();
const ses = await startFakeSes();
const env = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, AWS_ENDPOINT_URL_SESV2: ses.url, WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' };

async function cli(...args: string[]) {
  const out = await runCli(args, env);
  assert.equal(out.code, 0, `${args.join(' ')}: ${out.stderr}`);
  return out;
}

test('CLI: every change is recorded once as the CLI; audit list prints one entry a line, newest first', async () => {
  const p = (await cli('project', 'create', '--name', 'cli')).json();
  const k = (await cli('key', 'create', '--project', p.id, '--name', 'deploy')).json();
  await cli('key', 'revoke', k.id);
  const wh = (await cli('webhook', 'create', '--project', p.id, '--url', 'https://127.0.0.1:9/h')).json();
  assert.match(wh.secret, /^whsec_/);
  await cli('webhook', 'update', wh.id, '--disable');
  const rotated = (await cli('webhook', 'rotate-secret', wh.id)).json();
  assert.match(rotated.secret, /^whsec_/);
  assert.notEqual(rotated.secret, wh.secret);
  await cli('provider', 'connect', '--project', p.id, '--region', 'eu-west-1', '--access-key-id', 'AKIAEXAMPLE', '--secret-access-key', 'very-secret-value');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values ('dom_01JD3Z8K6Q5W0R1S2T3V4X5Y7A', ${p.id}, 'cli.example.com', 'eu-west-1', 'success')`;
  await cli('domain', 'update', 'dom_01JD3Z8K6Q5W0R1S2T3V4X5Y7A', '--tracking-domain', 't.cli.example.com');
  const dir = await mkdtemp(path.join(tmpdir(), 'audit-cli-'));
  await writeFile(path.join(dir, 'a.html'), '<p>Hi</p>');
  const t = (await cli('template', 'create', '--project', p.id, '--name', 'T', '--html-file', path.join(dir, 'a.html'))).json();
  await cli('template', 'publish', t.id);
  await cli('provider', 'disconnect', '--project', p.id);

  const out = await cli('audit', 'list', '--project', p.id);
  const lines = out.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((e) => e.action).reverse(), [
    'project.created', 'api_key.created', 'api_key.revoked', 'webhook.created', 'webhook.updated',
    'webhook.secret_rotated', 'provider.connected', 'domain.updated', 'template.created', 'template.published', 'provider.disconnected',
  ]);
  for (const e of lines) {
    assert.equal(e.actor.type, 'cli');
    assert.equal(e.project_id, p.id);
    assert.equal(e.ip, null);
  }
  assert.deepEqual(lines.find((e) => e.action === 'provider.connected').changes, {
    provider: 'ses', region: 'eu-west-1', configuration_set: null, events_queue_url: null, sns_topic_arn: null, max_send_rate: null,
  });
  const limited = await cli('audit', 'list', '--limit', '2');
  assert.deepEqual(limited.stdout.trimEnd().split('\n').map((l) => JSON.parse(l).id), lines.slice(0, 2).map((e) => e.id));

  const dump = (await ctx.sql<[{ d: string }]>`select string_agg(audit_log::text, E'\n') as d from audit_log`)[0].d;
  for (const secret of [k.key, wh.secret, rotated.secret, 'very-secret-value', 'AKIAEXAMPLE', 'sk_', 'whsec_']) assert.ok(!dump.includes(secret), secret);

  const bad = await runCli(['audit', 'list', '--limit', 'x'], env);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /--limit takes/);
});
