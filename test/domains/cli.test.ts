import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { TEST_SECRET_KEY } from '../helpers/app.ts';
import { domainsContext } from './setup.ts';

const { ses, ctx, project } = await domainsContext();
const ROOT = path.resolve(import.meta.dirname, '../..');

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'cli', '--', ...args], {
      cwd: ROOT,
      env: {
        PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`,
        HOME: process.env.HOME,
        DATABASE_URL: ctx.url,
        SECRET_KEY: TEST_SECRET_KEY,
        AWS_ENDPOINT_URL_SESV2: ses.url,
      },
    }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

test('domain add prints the domain with three CNAME records; domain check prints the new status', async () => {
  const { projectId } = await project();
  const added = await cli(['domain', 'add', '--project', projectId, '--domain', 'CLI.Example.com', '--mail-from', 'bounce']);
  assert.equal(added.code, 0, added.stderr);
  const d = JSON.parse(added.stdout);
  assert.match(d.id, /^dom_/);
  assert.equal(d.value, 'cli.example.com');
  assert.equal(d.region, 'us-east-1');
  assert.equal(d.verification_status, 'pending');
  const cnames = d.dns_records.filter((r: { record_type: string }) => r.record_type === 'CNAME');
  assert.equal(cnames.length, 3);
  for (const [i, token] of ses.identity('cli.example.com')!.tokens.entries()) {
    assert.deepEqual(cnames[i], { record_type: 'CNAME', name: `${token}._domainkey.cli.example.com`, value: `${token}.dkim.amazonses.com` });
  }
  assert.deepEqual(d.dns_records.filter((r: { record_type: string }) => r.record_type !== 'CNAME').map((r: { record_type: string }) => r.record_type), ['MX', 'TXT']);

  ses.setStatus('cli.example.com', { verification: 'SUCCESS', dkim: 'SUCCESS' });
  const checked = await cli(['domain', 'check', d.id]);
  assert.equal(checked.code, 0, checked.stderr);
  const c = JSON.parse(checked.stdout);
  assert.equal(c.id, d.id);
  assert.equal(c.verification_status, 'success');
  assert.equal(c.dkim_status, 'success');
  assert.ok(c.last_checked_at);
  const [row] = await ctx.sql`select verification_status from domains where id = ${d.id} and project_id = ${projectId}`;
  assert.equal(row!.verificationStatus, 'success');
});

test('domain add errors print one line on stderr and exit 1', async () => {
  const { projectId } = await project();
  const bad = await cli(['domain', 'add', '--project', projectId, '--domain', 'https://example.com/x']);
  assert.equal(bad.code, 1);
  assert.equal(bad.stdout, '');
  assert.match(bad.stderr, /^mailroom: domain "https:\/\/example.com\/x" has a scheme.*\n$/);
  const lonely = await project({ connected: false });
  const none = await cli(['domain', 'add', '--project', lonely.projectId, '--domain', 'x.example.com']);
  assert.equal(none.code, 1);
  assert.match(none.stderr, /no SES connection/);
  const missing = await cli(['domain', 'check']);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /DOMAIN_ID is required/);
});
