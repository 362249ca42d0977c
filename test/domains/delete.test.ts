import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addDomain } from '../../src/domains/service.ts';
import { newId } from '../../src/platform/ids.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { receivingDomain } from '../inbound/fixtures.ts';
import { domainsContext } from './setup.ts';

const { ses, ctx, project } = await domainsContext();
const { sql, config } = ctx;

type ErrorBody = { error: { type: string; message: string } };

test('DELETE /v1/domains/{id}: 204, recorded once as domain.deleted by the key; SES and sent emails are left alone', async () => {
  const t = await project();
  const domain = await addDomain(sql, config, t.projectId, 'gone.example.com');
  const emailId = newId('email');
  await sql`
    insert into emails (id, project_id, from_address, to_addresses, subject, text)
    values (${emailId}, ${t.projectId}, 'hello@gone.example.com', ${['someone@example.net']}, 'hi', 'hi')`;
  const sesCalls = ses.requests.length;

  const res = await ctx.call(t.key, `/v1/domains/${domain.id}`, { method: 'DELETE' });
  assert.equal(res.status, 204);
  assert.equal(await res.text(), '');
  assert.equal((await ctx.call(t.key, `/v1/domains/${domain.id}`)).status, 404);
  assert.equal((await (await ctx.call(t.key, '/v1/domains')).json()).data.length, 0);
  assert.equal(ses.requests.length, sesCalls, 'no SES call: the identity in the customer\'s account stays');
  assert.ok(ses.identity('gone.example.com'), 'the SES identity still exists');
  assert.equal((await sql`select 1 from emails where id = ${emailId} and project_id = ${t.projectId}`).length, 1, 'sent email untouched');

  const again = await ctx.call(t.key, `/v1/domains/${domain.id}`, { method: 'DELETE' });
  assert.equal(again.status, 404, 'already deleted');
  assert.equal(((await again.json()) as ErrorBody).error.type, 'not_found');
  const entries = await sql<{ actorType: string; actorId: string; targetId: string; changes: unknown }[]>`
    select actor_type, actor_id, target_id, changes from audit_log where project_id = ${t.projectId} and action = 'domain.deleted'`;
  assert.deepEqual([...entries], [{ actorType: 'api_key', actorId: t.keyId, targetId: domain.id, changes: { name: 'gone.example.com' } }]);

  // The name can be added again afterwards.
  assert.ok(await addDomain(sql, config, t.projectId, 'gone.example.com'));
});

test('DELETE /v1/domains/{id}: unknown, malformed or another project\'s domain answers 404 and nothing changes', async () => {
  const mine = await project();
  const other = await project();
  const theirs = await addDomain(sql, config, other.projectId, 'theirs.example.com');
  for (const id of [theirs.id, newId('domain'), 'nope']) {
    const res = await ctx.call(mine.key, `/v1/domains/${id}`, { method: 'DELETE' });
    assert.equal(res.status, 404, id);
    assert.equal(((await res.json()) as ErrorBody).error.type, 'not_found');
  }
  assert.equal((await ctx.call(other.key, `/v1/domains/${theirs.id}`)).status, 200, 'still there');
  assert.equal((await sql`select 1 from audit_log where action = 'domain.deleted' and target_id = ${theirs.id}`).length, 0);
});

test('DELETE /v1/domains/{id} with receiving on answers 409 domain_receiving_on and deletes nothing', async () => {
  const t = await project();
  const id = await receivingDomain(sql, t.projectId, 'inbound.example.com');
  const res = await ctx.call(t.key, `/v1/domains/${id}`, { method: 'DELETE' });
  assert.equal(res.status, 409);
  const body = (await res.json()) as ErrorBody;
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(body.error.type, 'domain_receiving_on');
  assert.match(body.error.message, new RegExp(`DELETE /v1/domains/${id}/receiving`));
  assert.equal((await ctx.call(t.key, `/v1/domains/${id}`)).status, 200, 'still there');
  assert.equal((await sql`select 1 from audit_log where action = 'domain.deleted' and target_id = ${id}`).length, 0);

  await sql`update domains set receiving = null where id = ${id}`;
  assert.equal((await ctx.call(t.key, `/v1/domains/${id}`, { method: 'DELETE' })).status, 204, 'once receiving is off');
});

test('a sending key may not delete a domain', async () => {
  const t = await project();
  const domain = await addDomain(sql, config, t.projectId, 'keyed.example.com');
  const sending = await createApiKey(sql, t.projectId, 'sender', 'sending');
  const res = await ctx.call(sending.key, `/v1/domains/${domain.id}`, { method: 'DELETE' });
  assert.equal(res.status, 403);
  assert.equal(((await res.json()) as ErrorBody).error.type, 'permission_denied');
  assert.equal((await ctx.call(t.key, `/v1/domains/${domain.id}`)).status, 200, 'still there');
});
