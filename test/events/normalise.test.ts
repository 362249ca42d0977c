import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ingestCounters, ingestSesRecord } from '../../src/events/ingest.ts';
import { normaliseSesEvent, unwrapSesRecord, type NormalisedEvent } from '../../src/events/normalise.ts';
import { createLogger } from '../../src/platform/log.ts';
import { createTestContext } from '../helpers/app.ts';
import { activeEndpoint, eventsOf, sentEmail, ses, snsEnvelope } from './fixtures.ts';

const MID = '0100018f-test-message-id';

function event(raw: unknown): NormalisedEvent {
  const n = normaliseSesEvent(raw);
  assert.equal(n.kind, 'event', `expected an event, got ${JSON.stringify(n)}`);
  return n as NormalisedEvent;
}

test('normalisation table: each SES type becomes its event with the contract data', () => {
  const table: Array<[string, unknown, string, Record<string, unknown>]> = [
    ['Delivery', ses.delivery(MID, ['a@x.test', 'b@x.test']), 'email.delivered',
      { to: ['a@x.test', 'b@x.test'], smtp_response: '250 2.6.0 Message received' }],
    ['Bounce Permanent', ses.bounce(MID, 'Permanent'), 'email.bounced',
      { to: ['ann@example.net'], bounce_type: 'permanent', bounce_subtype: 'General', diagnostic: 'smtp; 550 5.1.1 user unknown' }],
    ['Bounce Transient', ses.bounce(MID, 'Transient', ['ann@example.net'], 'MailboxFull'), 'email.bounced',
      { to: ['ann@example.net'], bounce_type: 'transient', bounce_subtype: 'MailboxFull', diagnostic: 'smtp; 550 5.1.1 user unknown' }],
    ['Bounce Undetermined', ses.bounce(MID, 'Undetermined', ['ann@example.net'], 'Undetermined'), 'email.bounced',
      { to: ['ann@example.net'], bounce_type: 'undetermined', bounce_subtype: 'Undetermined', diagnostic: 'smtp; 550 5.1.1 user unknown' }],
    ['Complaint', ses.complaint(MID), 'email.complained', { to: ['ann@example.net'], feedback_type: 'abuse' }],
    ['Complaint without feedback report', ses.complaint(MID, ['ann@example.net'], null), 'email.complained',
      { to: ['ann@example.net'], feedback_type: null }],
    ['DeliveryDelay', ses.deliveryDelay(MID), 'email.delivery_delayed',
      { to: ['ann@example.net'], delay_type: 'TransientCommunicationFailure', diagnostic: 'smtp; 421 4.4.1 try again later' }],
    ['Reject', ses.reject(MID), 'email.failed', { reason: 'message_rejected', message: 'The provider rejected the message: Bad content' }],
    ['legacy notificationType Bounce', ses.legacyBounce(MID), 'email.bounced',
      { to: ['ann@example.net'], bounce_type: 'permanent', bounce_subtype: 'Suppressed', diagnostic: 'Amazon SES has suppressed sending to this address' }],
  ];
  for (const [name, raw, type, data] of table) {
    const n = event(raw);
    assert.equal(n.type, type, name);
    assert.deepEqual(n.data, data, name);
    assert.equal(n.providerMessageId, MID, name);
    assert.match(n.dedupeKey, /^ses:[0-9a-f]{64}$/, name);
  }
});

test('side effects: delivery time, and suppression only for permanent bounces and complaints', () => {
  assert.deepEqual(event(ses.delivery(MID, ['a@x.test'], '2025-03-01T10:00:02.000Z')).deliveredAt, new Date('2025-03-01T10:00:02.000Z'));
  assert.deepEqual(event(ses.bounce(MID, 'Permanent')).suppress, { addresses: ['ann@example.net'], reason: 'bounced' });
  assert.equal(event(ses.bounce(MID, 'Transient')).suppress, undefined);
  assert.equal(event(ses.bounce(MID, 'Undetermined')).suppress, undefined);
  assert.deepEqual(event(ses.complaint(MID)).suppress, { addresses: ['ann@example.net'], reason: 'complained' });
  assert.equal(event(ses.deliveryDelay(MID)).suppress, undefined);
});

test('SES Open and Click become email.opened and email.clicked, with the agent and machine but never the address', () => {
  const open = event(ses.open(MID));
  assert.equal(open.type, 'email.opened');
  assert.deepEqual(open.data, { to: ['ann@example.net', 'hidden@example.net'], user_agent: 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)', machine: true });
  assert.deepEqual(open.engagedAt, new Date('2025-03-01T12:00:00.000Z'));
  const click = event(ses.click(MID, 'https://shop.example/a'));
  assert.equal(click.type, 'email.clicked');
  assert.deepEqual(click.data, { to: ['ann@example.net', 'hidden@example.net'], link: 'https://shop.example/a', user_agent: ses.click(MID, '').click.userAgent, machine: false });
  assert.doesNotMatch(JSON.stringify([open, click]), /192\.0\.2/);
  assert.notEqual(event(ses.open(MID)).dedupeKey, event(ses.open(MID, 'Other agent')).dedupeKey);
  assert.notEqual(event(ses.click(MID, 'https://a.example/')).dedupeKey, event(ses.click(MID, 'https://b.example/')).dedupeKey);
  assert.equal(normaliseSesEvent({ eventType: 'Click', mail: { messageId: MID } }).kind, 'invalid');
});

test('ignored and invalid records produce no event', () => {
  assert.deepEqual(normaliseSesEvent(ses.send(MID)), { kind: 'ignored', reason: 'Send' });
  assert.deepEqual(normaliseSesEvent({ eventType: 'Subscription', mail: { messageId: MID } }), { kind: 'ignored', reason: 'Subscription' });
  assert.deepEqual(normaliseSesEvent({ eventType: 'SomethingNew', mail: { messageId: MID } }), { kind: 'ignored', reason: 'SomethingNew' });
  assert.deepEqual(normaliseSesEvent({ notificationType: 'AmazonSnsSubscriptionSucceeded', mail: { messageId: MID } }).kind, 'ignored');
  assert.equal(normaliseSesEvent({ eventType: 'Delivery' }).kind, 'invalid'); // no mail.messageId
  assert.equal(normaliseSesEvent({ eventType: 'Bounce', mail: { messageId: MID } }).kind, 'invalid'); // no bounce object
  assert.equal(normaliseSesEvent('nonsense').kind, 'invalid');
  assert.equal(normaliseSesEvent(null).kind, 'invalid');
});

test('dedupe keys: the same notification repeats its key; different notifications differ', () => {
  const a = event(ses.delivery(MID, ['a@x.test', 'b@x.test'])).dedupeKey;
  assert.equal(event(ses.delivery(MID, ['b@x.test', 'a@x.test'])).dedupeKey, a, 'recipient order does not matter');
  assert.notEqual(event(ses.delivery(MID, ['a@x.test'])).dedupeKey, a);
  assert.notEqual(event(ses.delivery(MID, ['a@x.test', 'b@x.test'], '2025-03-01T10:00:09.000Z')).dedupeKey, a);
  assert.notEqual(event(ses.delivery('other-id', ['a@x.test', 'b@x.test'])).dedupeKey, a);
  assert.notEqual(event(ses.bounce(MID, 'Permanent')).dedupeKey, event(ses.complaint(MID)).dedupeKey);
});

test('SQS bodies: an SNS envelope is unwrapped, raw SES JSON is taken as is, garbage is undefined', () => {
  const record = ses.delivery(MID);
  assert.deepEqual(unwrapSesRecord(snsEnvelope(record)), record);
  assert.deepEqual(unwrapSesRecord(JSON.stringify(record)), record);
  assert.equal(unwrapSesRecord('not json'), undefined);
  assert.equal(unwrapSesRecord(JSON.stringify({ Type: 'Notification', Message: 'not json' })), undefined);
});

const ctx = await createTestContext();
const log = createLogger('silent');

test('ingest: unknown message id is dropped and counted; another project cannot claim the email', async () => {
  const a = await ctx.tenant('a');
  const b = await ctx.tenant('b');
  const email = await sentEmail(ctx.sql, a.projectId);
  const before = ingestCounters.unknownEmail;

  const unknown = await ctx.sql.begin((tx) => ingestSesRecord(tx, log, a.projectId, ses.delivery('no-such-message')));
  assert.equal(unknown, 'unknown_email');
  const crossProject = await ctx.sql.begin((tx) => ingestSesRecord(tx, log, b.projectId, ses.bounce(email.providerMessageId, 'Permanent')));
  assert.equal(crossProject, 'unknown_email');
  assert.equal(ingestCounters.unknownEmail, before + 2);

  const [{ count }] = await ctx.sql<[{ count: number }]>`select count(*)::int as count from events`;
  assert.equal(count, 0);
  const suppressions = await ctx.sql`select * from suppressions where project_id = ${b.projectId}`;
  assert.equal(suppressions.length, 0);
});

test('ingest: effects commit with the event, once, and fan out to active endpoints', async () => {
  const t = await ctx.tenant();
  const endpointId = await activeEndpoint(ctx.sql, t.projectId);
  const email = await sentEmail(ctx.sql, t.projectId, ['Ann <Ann@Example.net>', 'bob@example.net']);
  const run = (raw: unknown) => ctx.sql.begin((tx) => ingestSesRecord(tx, log, t.projectId, raw));

  assert.equal(await run(ses.delivery(email.providerMessageId, ['Ann@Example.net'])), 'recorded');
  assert.equal(await run(ses.delivery(email.providerMessageId, ['Ann@Example.net'])), 'duplicate');
  assert.equal(await run(ses.bounce(email.providerMessageId, 'Permanent', ['Ann@Example.net'])), 'recorded');
  assert.equal(await run(ses.bounce(email.providerMessageId, 'Transient', ['bob@example.net'])), 'recorded');
  assert.equal(await run(ses.send(email.providerMessageId)), 'ignored');

  const [row] = await ctx.sql`select delivered_at, status from emails where id = ${email.id} and project_id = ${t.projectId}`;
  assert.deepEqual(row!.deliveredAt, new Date('2025-03-01T10:00:02.000Z'));
  assert.equal(row!.status, 'sent');

  const events = await eventsOf(ctx.sql, t.projectId, email.id);
  assert.deepEqual(events.map((e) => e.type), ['email.delivered', 'email.bounced', 'email.bounced']);

  const suppressions = await ctx.sql`select address, reason, email_id from suppressions where project_id = ${t.projectId}`;
  assert.deepEqual(suppressions.map((s) => ({ ...s })), [{ address: 'ann@example.net', reason: 'bounced', emailId: email.id }]);

  const deliveries = await ctx.sql`select event_id, status from webhook_deliveries where project_id = ${t.projectId} and endpoint_id = ${endpointId}`;
  assert.deepEqual(new Set(deliveries.map((d) => d.eventId)), new Set(events.map((e) => e.id)));
  assert.ok(deliveries.every((d) => d.status === 'pending'));
  // Three events for one endpoint wait on one flush of that endpoint.
  const jobs = await ctx.sql`
    select t.identifier, j.key from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
    where j.payload->>'project_id' = ${t.projectId}`;
  assert.deepEqual(jobs.map((j) => [j.identifier, j.key]), [['webhook__flush', `webhook__flush:${endpointId}`]]);
});
