import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newId } from '../../src/platform/ids.ts';
import { signedInWithTwoProjects } from '../dashboard/client.ts';

// The dashboard's tracking and filter forms over HTTP: refusals come back as the page with the
// reason (422), nothing changes, and another project's domain is not reachable.
const { ctx, b, a, other, P } = await signedInWithTwoProjects();

async function domainOf(projectId: string, value: string) {
  const id = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values (${id}, ${projectId}, ${value}, 'us-east-1', 'success')`;
  return id;
}

test('domain tracking form: no base is refused with the reason, a bad host too, and nothing changes', async () => {
  // This instance has no PUBLIC_BASE_URL.
  const id = await domainOf(a.projectId, 'shop.example');
  await b.get(`${P}/domains`);
  const refused = await b.post(`${P}/domains/${id}/tracking`, { open_tracking: 'on' });
  assert.equal(refused.res.status, 422);
  assert.match(refused.text, /role="alert">tracking needs a base for its links: set tracking_domain for shop\.example/);
  const badHost = await b.post(`${P}/domains/${id}/tracking`, { click_tracking: 'on', tracking_domain: 'https://x.example/' });
  assert.equal(badHost.res.status, 422);
  assert.match(badHost.text, /tracking domain &quot;https:\/\/x\.example\/&quot; has a scheme/);
  const [row] = await ctx.sql`select open_tracking, click_tracking, tracking_domain from domains where id = ${id} and project_id = ${a.projectId}`;
  assert.deepEqual({ ...row }, { openTracking: false, clickTracking: false, trackingDomain: null });

  const saved = await b.post(`${P}/domains/${id}/tracking`, { click_tracking: 'on', tracking_domain: 't.shop.example' });
  assert.equal(saved.res.status, 303);
  const page = await b.get(`${P}/domains`);
  assert.match(page.text, /name="click_tracking" value="on" checked/);
  assert.doesNotMatch(page.text, /name="open_tracking" value="on" checked/);

  // A host under a domain still pending verification is refused with the reason (§22.11).
  const pending = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values (${pending}, ${a.projectId}, 'pending.example', 'us-east-1', 'pending')`;
  const unverified = await b.post(`${P}/domains/${pending}/tracking`, { click_tracking: 'on', tracking_domain: 't.pending.example' });
  assert.equal(unverified.res.status, 422);
  assert.match(unverified.text, /tracking domain t\.pending\.example must be under a verified domain of the project: pending\.example is pending/);
  const [still] = await ctx.sql`select tracking_domain from domains where id = ${pending} and project_id = ${a.projectId}`;
  assert.equal(still!.trackingDomain, null);

  const foreign = await domainOf(other.projectId, 'other.example');
  const cross = await b.post(`${P}/domains/${foreign}/tracking`, { open_tracking: 'on', tracking_domain: 't.other.example' });
  assert.equal(cross.res.status, 404);
  const [untouched] = await ctx.sql`select open_tracking from domains where id = ${foreign} and project_id = ${other.projectId}`;
  assert.equal(untouched!.openTracking, false);
});

test('webhook event types: ticked boxes become the filter, none ticked means all', async () => {
  await b.get(`${P}/webhooks`);
  const created = await b.postMany(`${P}/webhooks`, [['url', 'http://127.0.0.1:9/hook'], ['event_types', 'email.opened'], ['event_types', 'email.clicked']]);
  assert.equal(created.status, 303);
  const endpointId = created.headers.get('location')!.split('/').pop()!;
  const [row] = await ctx.sql`select event_types from webhook_endpoints where id = ${endpointId} and project_id = ${a.projectId}`;
  assert.deepEqual(row!.eventTypes, ['email.opened', 'email.clicked']);
  await b.get(`${P}/webhooks/${endpointId}`);
  const cleared = await b.post(`${P}/webhooks/${endpointId}/event-types`, {});
  assert.equal(cleared.res.status, 303);
  const [after] = await ctx.sql`select event_types from webhook_endpoints where id = ${endpointId} and project_id = ${a.projectId}`;
  assert.equal(after!.eventTypes, null);
  const bogus = await b.post(`${P}/webhooks/${endpointId}/event-types`, { event_types: 'email.read' });
  assert.equal(bogus.res.status, 422);
  assert.match(bogus.text, /unknown event type email\.read/);
});
