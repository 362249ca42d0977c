import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { recordEvent } from '../../src/events/record.ts';
import { isWellFormedId } from '../../src/platform/ids.ts';
import { createEndpoint, updateEndpoint } from '../../src/webhooks/service.ts';
import { markSent, claimEmail } from '../../src/emails/queries.ts';
import { waitFor } from '../helpers/wait.ts';

const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });

async function queuedEmail(key: string, tags: { name: string; value: string }[] = []) {
  const res = await ctx.call(key, '/v1/emails', { method: 'POST', body: { from: 'a@example.com', to: 'b@example.net', subject: 's', text: 't', tags } });
  assert.equal(res.status, 201);
  return ((await res.json()) as { id: string }).id;
}

/** Notifications on graphile-worker's channel while `during` runs. */
async function jobNotificationsDuring(during: () => Promise<unknown>) {
  const seen: string[] = [];
  const listening = await ctx.sql.listen('jobs:insert', (payload) => seen.push(payload));
  await during();
  await ctx.sql`select pg_notify('jobs:insert', 'marker')`;
  await waitFor('the marker notification', async () => seen.includes('marker'), 5000);
  await listening.unlisten();
  return seen.filter((p) => p !== 'marker');
}

test('an event fans out to every active endpoint in one statement: well-formed delivery ids, one flush job per endpoint, tags in the data', async () => {
  const t = await ctx.tenant('fanout');
  const endpoints = [];
  for (let i = 0; i < 3; i++) endpoints.push((await createEndpoint(ctx.sql, ctx.config, t.projectId, `http://127.0.0.1:9/h${i}`)).endpoint);
  await updateEndpoint(ctx.sql, ctx.config, t.projectId, endpoints[2]!.id, { enabled: false });
  const emailId = await queuedEmail(t.key, [{ name: 'flow', value: 'welcome' }]);

  const notifications = await jobNotificationsDuring(async () => {
    const eventId = await recordEvent(ctx.sql, { projectId: t.projectId, emailId, type: 'email.delivered', data: { to: ['b@example.net'] } });
    assert.ok(eventId && isWellFormedId('event', eventId));
  });
  assert.equal(notifications.length, 1, 'one NOTIFY for all the jobs');
  assert.match(notifications[0]!, /"count":2/);

  const deliveries = await ctx.sql<{ id: string; endpointId: string; status: string }[]>`
    select id, endpoint_id, status from webhook_deliveries where project_id = ${t.projectId} order by endpoint_id`;
  assert.deepEqual(deliveries.map((d) => d.endpointId), [endpoints[0]!.id, endpoints[1]!.id]);
  for (const d of deliveries) {
    assert.ok(isWellFormedId('delivery', d.id), d.id);
    assert.equal(d.status, 'pending');
  }
  // One flush job per endpoint, keyed by it, whatever number of deliveries it has waiting.
  const jobs = await ctx.sql<{ key: string; payload: { endpoint_id: string; project_id: string } }[]>`
    select j.key, j.payload from graphile_worker._private_jobs j
    join graphile_worker._private_tasks t on t.id = j.task_id and t.identifier = 'webhook__flush'
    where j.payload->>'project_id' = ${t.projectId} order by j.key`;
  assert.deepEqual(jobs.map((j) => j.payload.endpoint_id), deliveries.map((d) => d.endpointId));
  assert.ok(jobs.every((j) => j.key === `webhook__flush:${j.payload.endpoint_id}`));
  const [event] = await ctx.sql<[{ data: { tags: unknown } }]>`select data from events where email_id = ${emailId}`;
  assert.deepEqual(event.data.tags, [{ name: 'flow', value: 'welcome' }]);

  // Delivery ids made in the statement sort by time like the application's own.
  const [{ id: sqlMade }] = await ctx.sql<[{ id: string }]>`select mailroom_new_id('whd_') as id`;
  assert.ok(isWellFormedId('delivery', sqlMade));
  assert.ok(sqlMade > deliveries[0]!.id.slice(0, 14), 'a later id sorts after an earlier one');
});

test('with no active endpoint, an event adds no job and sends no NOTIFY; a repeated dedupe key records nothing', async () => {
  const t = await ctx.tenant('quiet');
  const emailId = await queuedEmail(t.key);
  const notifications = await jobNotificationsDuring(async () => {
    const first = await recordEvent(ctx.sql, { projectId: t.projectId, emailId, type: 'email.bounced', data: {}, dedupeKey: 'same' });
    const again = await recordEvent(ctx.sql, { projectId: t.projectId, emailId, type: 'email.bounced', data: {}, dedupeKey: 'same' });
    assert.ok(first);
    assert.equal(again, undefined);
  });
  assert.deepEqual(notifications, []);
  assert.equal((await ctx.sql`select 1 from events where email_id = ${emailId}`).length, 1);
});

test('markSent writes the status, both events, their deliveries and jobs together, and nothing when the lease is lost', async () => {
  const t = await ctx.tenant('settle');
  await createEndpoint(ctx.sql, ctx.config, t.projectId, 'http://127.0.0.1:9/settle');
  const emailId = await queuedEmail(t.key);
  const lease = { owner: 'pool/a', seconds: 45, deadAfterSeconds: 30 };
  const email = (await claimEmail(ctx.sql, t.projectId, emailId, lease))!;
  assert.equal(email.hasProvider, false);
  assert.equal(email.hasSuppressions, false);
  const stale = { ...email, leaseOwner: 'pool/someone-else' };
  assert.equal(await markSent(ctx.sql, stale, 'msg-1', true, [{ type: 'email.sent', data: {} }]), false);
  assert.equal((await ctx.sql`select 1 from events where email_id = ${emailId}`).length, 0, 'a lost lease records no event');

  const ok = await markSent(ctx.sql, email, 'msg-1', true, [{ type: 'email.sent', data: {} }, { type: 'email.delivered', data: {} }]);
  assert.equal(ok, true);
  const [row] = await ctx.sql<[{ status: string; deliveredAt: Date | null }]>`select status, delivered_at from emails where id = ${emailId}`;
  assert.equal(row.status, 'sent');
  assert.ok(row.deliveredAt);
  const events = await ctx.sql<{ type: string }[]>`select type from events where email_id = ${emailId} order by created_at, id`;
  assert.deepEqual(events.map((e) => e.type), ['email.sent', 'email.delivered']);
  const [{ count }] = await ctx.sql<[{ count: number }]>`
    select count(*)::int as count from webhook_deliveries d join events e on e.id = d.event_id where e.email_id = ${emailId}`;
  assert.equal(count, 2);
});

test('an SES event finds its email by message id within the days before SES took it, and one made long before through every partition', async () => {
  const { ingestSesRecord } = await import('../../src/events/ingest.ts');
  const { ses } = await import('./fixtures.ts');
  const t = await ctx.tenant('lookup');
  const ingest = (record: unknown) => ctx.sql.begin((tx) => ingestSesRecord(tx, ctx.deps.log, t.projectId, record));
  const sentNow = await queuedEmail(t.key);
  const scheduledLongAgo = await queuedEmail(t.key);
  for (const [emailId, messageId] of [[sentNow, 'ses-now'], [scheduledLongAgo, 'ses-later']] as const) {
    const email = (await claimEmail(ctx.sql, t.projectId, emailId, { owner: 'pool/a', seconds: 45, deadAfterSeconds: 30 }))!;
    assert.equal(await markSent(ctx.sql, email, messageId, false, [{ type: 'email.sent', data: {} }]), true);
  }
  // SES took the first just now, the second 20 days after its email was made (as a schedule would).
  const delivered = (messageId: string, at: Date) => {
    const record = ses.delivery(messageId, ['b@example.net'], at.toISOString());
    return { ...record, mail: { ...record.mail, timestamp: at.toISOString() } };
  };
  assert.equal(await ingest(delivered('ses-now', new Date())), 'recorded');
  assert.equal(await ingest(delivered('ses-later', new Date(Date.now() + 20 * 86_400_000))), 'recorded');
  assert.equal(await ingest(delivered('ses-unknown', new Date())), 'unknown_email');
  const rows = await ctx.sql<{ emailId: string }[]>`
    select email_id from events where project_id = ${t.projectId} and type = 'email.delivered' order by email_id`;
  assert.deepEqual(rows.map((r) => r.emailId), [sentNow, scheduledLongAgo].sort());
});
