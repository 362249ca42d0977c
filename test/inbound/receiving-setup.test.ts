import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connectProvider } from '../../src/providers/connections.ts';
import { newId } from '../../src/platform/ids.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSesReceipt } from '../helpers/fake-ses-receipt.ts';

const ses = await startFakeSesReceipt();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SES: ses.endpoint } });
const { sql, config } = ctx;
const TOPIC = 'arn:aws:sns:us-east-1:123456789012:ses-events';

async function project(opts: { connected?: boolean; status?: string } = {}) {
  const t = await ctx.tenant();
  if (opts.connected !== false) {
    await connectProvider(sql, config, { projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret' });
  }
  const domainId = newId('domain');
  const value = `d${Math.random().toString(36).slice(2, 8)}.acme.test`;
  await sql`insert into domains (id, project_id, value, region, verification_status) values (${domainId}, ${t.projectId}, ${value}, 'us-east-1', ${opts.status ?? 'success'})`;
  return { ...t, domainId, value };
}

const enable = (key: string, domainId: string, body: unknown) => ctx.call(key, `/v1/domains/${domainId}/receiving`, { method: 'POST', body });

test('with no active rule set: makes and activates `mailroom`, adds the rule, answers the exact shape; GET shows it; a second call updates', async () => {
  const t = await project();
  const res = await enable(t.key, t.domainId, { bucket: 'acme-inbound', prefix: 'mail/', topic_arn: TOPIC });
  assert.equal(res.status, 200, await res.clone().text());
  const body = await res.json();
  assert.deepEqual(body, {
    receiving: {
      status: 'pending', bucket: 'acme-inbound', prefix: 'mail/', rule_set: 'mailroom', rule: `mailroom-${t.value}`,
      mx: { type: 'MX', name: t.value, value: 'inbound-smtp.us-east-1.amazonaws.com', priority: 10 },
    },
  });
  assert.equal(ses.active, 'mailroom');
  assert.deepEqual(ses.sets.get('mailroom'), [{
    Name: `mailroom-${t.value}`, Enabled: true, ScanEnabled: true, TlsPolicy: 'Optional', Recipients: [t.value],
    Actions: [{ S3Action: { BucketName: 'acme-inbound', ObjectKeyPrefix: 'mail/', TopicArn: TOPIC } }],
  }]);
  const domain = await (await ctx.call(t.key, `/v1/domains/${t.domainId}`)).json() as { receiving: unknown };
  assert.deepEqual(domain.receiving, body.receiving);

  const again = await enable(t.key, t.domainId, { bucket: 'acme-inbound-2', topic_arn: TOPIC });
  assert.equal(again.status, 200);
  assert.equal(ses.sets.get('mailroom')!.length, 1, 'the same rule, updated');
  assert.equal(ses.sets.get('mailroom')![0]!.Actions[0]!.S3Action!.BucketName, 'acme-inbound-2');
  assert.ok(ses.calls.some((c) => c.action === 'UpdateReceiptRule'));

  const [audit] = await sql`select action from audit_log where project_id = ${t.projectId} and action like 'domain.receiving%' order by id limit 1`;
  assert.equal(audit?.action, 'domain.receiving_enabled');

  const off = await ctx.call(t.key, `/v1/domains/${t.domainId}/receiving`, { method: 'DELETE' });
  assert.deepEqual(await off.json(), { receiving: null });
  assert.deepEqual(ses.sets.get('mailroom'), [], 'the rule only: the set stays');
  assert.equal(ses.active, 'mailroom');
  assert.equal(((await (await ctx.call(t.key, `/v1/domains/${t.domainId}`)).json()) as { receiving: unknown }).receiving, null);
});

test('a customer\'s active rule set is used, never replaced', async () => {
  const theirs = { Name: 'support-desk', Enabled: true, ScanEnabled: true, TlsPolicy: 'Require', Recipients: ['help.example.com'], Actions: [] };
  ses.activate('customer-rules', [theirs]);
  const t = await project();
  const body = await (await enable(t.key, t.domainId, { bucket: 'acme-inbound', topic_arn: TOPIC })).json() as { receiving: { rule_set: string; prefix: string } };
  assert.equal(body.receiving.rule_set, 'customer-rules');
  assert.equal(body.receiving.prefix, '');
  assert.equal(ses.active, 'customer-rules');
  assert.deepEqual(ses.sets.get('customer-rules')!.map((r) => r.Name), ['support-desk', `mailroom-${t.value}`]);
  assert.ok(!ses.calls.some((c) => c.action === 'SetActiveReceiptRuleSet' && c.params.RuleSetName !== 'mailroom'));
});

test('SES refusals answer 422 naming the AWS error and, for AccessDenied, the missing IAM action', async () => {
  const t = await project();
  ses.deny('CreateReceiptRule');
  try {
    const res = await enable(t.key, t.domainId, { bucket: 'acme-inbound', topic_arn: TOPIC });
    assert.equal(res.status, 422);
    const msg = ((await res.json()) as { detail: { msg: string }[] }).detail[0]!.msg;
    assert.match(msg, /AccessDenied/);
    assert.match(msg, /ses:CreateReceiptRule/);
  } finally {
    ses.allow('CreateReceiptRule');
  }
  const bad = await enable(t.key, t.domainId, { bucket: 'no-policy-bucket', topic_arn: TOPIC });
  assert.equal(bad.status, 422);
  assert.match(((await bad.json()) as { detail: { msg: string }[] }).detail[0]!.msg, /InvalidS3Configuration/);
  assert.equal(((await (await ctx.call(t.key, `/v1/domains/${t.domainId}`)).json()) as { receiving: unknown }).receiving, null, 'nothing stored on a refusal');
});

test('bad input, an unverified domain, a project without SES and another project\'s domain are refused', async () => {
  const t = await project();
  assert.equal((await enable(t.key, t.domainId, { bucket: 'A_B', topic_arn: TOPIC })).status, 422);
  assert.equal((await enable(t.key, t.domainId, { bucket: 'acme-inbound', topic_arn: 'not-an-arn' })).status, 422);
  assert.equal((await enable(t.key, t.domainId, { bucket: 'acme-inbound', topic_arn: TOPIC, extra: 1 })).status, 422);
  const pending = await project({ status: 'pending' });
  assert.equal((await enable(pending.key, pending.domainId, { bucket: 'acme-inbound', topic_arn: TOPIC })).status, 422);
  const sink = await project({ connected: false });
  assert.equal((await enable(sink.key, sink.domainId, { bucket: 'acme-inbound', topic_arn: TOPIC })).status, 422);
  assert.equal((await enable(t.key, pending.domainId, { bucket: 'acme-inbound', topic_arn: TOPIC })).status, 404);
  assert.equal((await ctx.call(t.key, `/v1/domains/${pending.domainId}`)).status, 404);
});
