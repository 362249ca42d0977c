import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addDomain, checkDomain } from '../../src/domains/service.ts';
import { DomainList } from '../../src/domains/schemas.ts';
import { domainsContext } from './setup.ts';

const { ses, ctx, project } = await domainsContext();
const { sql, config } = ctx;

test('GET /v1/domains lists the project\'s domains with their DNS records and statuses', async () => {
  const t = await project();
  const a = await addDomain(sql, config, t.projectId, 'a.example.com', { mailFrom: 'mail' });
  await addDomain(sql, config, t.projectId, 'b.example.com', { region: 'eu-west-1' });
  ses.setStatus('a.example.com', { verification: 'SUCCESS', dkim: 'SUCCESS', mailFrom: 'TEMPORARY_FAILURE' });
  const checked = await checkDomain(sql, config, t.projectId, a.id);

  const res = await ctx.call(t.key, '/v1/domains');
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.ok(DomainList.safeParse(body).success, 'matches the DomainList schema');
  const [first, second] = body.data;
  assert.equal(body.data.length, 2);
  assert.deepEqual(Object.keys(first).sort(), [
    'click_tracking', 'created_at', 'dkim_status', 'dns_records', 'id', 'last_checked_at', 'mail_from_status', 'open_tracking', 'receiving', 'region',
    'tracking_domain', 'value', 'verification_status',
  ]);
  assert.equal(first.id, a.id);
  assert.equal(first.value, 'a.example.com');
  assert.equal(first.region, 'us-east-1');
  assert.equal(first.verification_status, 'success');
  assert.equal(first.dkim_status, 'success');
  assert.equal(first.mail_from_status, 'temporary_failure');
  assert.equal(first.last_checked_at, checked.lastCheckedAt!.toISOString());
  assert.equal(first.created_at, a.createdAt.toISOString());
  const tokens = ses.identity('a.example.com')!.tokens;
  assert.deepEqual(first.dns_records, [
    ...tokens.map((tk) => ({ record_type: 'CNAME', name: `${tk}._domainkey.a.example.com`, value: `${tk}.dkim.amazonses.com` })),
    { record_type: 'MX', name: 'mail.a.example.com', value: '10 feedback-smtp.us-east-1.amazonses.com' },
    { record_type: 'TXT', name: 'mail.a.example.com', value: '"v=spf1 include:amazonses.com ~all"' },
  ]);
  assert.equal(second.value, 'b.example.com');
  assert.equal(second.region, 'eu-west-1');
  assert.equal(second.verification_status, 'pending');
  assert.equal(second.last_checked_at, null);
  assert.equal(second.dns_records.length, 3);
});

test('each project sees only its own domains, even for the same domain name', async () => {
  const one = await project();
  const two = await project();
  await addDomain(sql, config, one.projectId, 'shared.example.com');
  // Same SES account behind both connections: the second project adopts the identity.
  const theirs = await addDomain(sql, config, two.projectId, 'shared.example.com');
  await addDomain(sql, config, two.projectId, 'only-two.example.com');
  const listOne = (await (await ctx.call(one.key, '/v1/domains')).json()).data;
  const listTwo = (await (await ctx.call(two.key, '/v1/domains')).json()).data;
  assert.deepEqual(listOne.map((d: { value: string }) => d.value), ['shared.example.com']);
  assert.deepEqual(listTwo.map((d: { value: string }) => d.value), ['shared.example.com', 'only-two.example.com']);
  assert.equal(listTwo[0].id, theirs.id);
  assert.notEqual(listOne[0].id, theirs.id);
  // A project with no domains gets an empty list, not someone else's.
  const empty = await project({ connected: false });
  assert.deepEqual(await (await ctx.call(empty.key, '/v1/domains')).json(), { data: [] });
});

test('GET /v1/domains needs a valid key', async () => {
  for (const key of [undefined, 'sk_wrong']) {
    const res = await ctx.call(key, '/v1/domains');
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error.type, 'authentication_failed');
  }
});

test('the schema documents DomainResponse and the list route', async () => {
  const doc = await (await ctx.call(undefined, '/openapi.json')).json();
  assert.ok(doc.paths['/v1/domains'].get.responses['200']);
  const props = doc.components.schemas.DomainResponse.properties;
  assert.deepEqual(props.verification_status.enum, ['pending', 'success', 'failed', 'temporary_failure', 'not_started']);
  assert.ok(doc.components.schemas.DnsRecordResponse);
});
