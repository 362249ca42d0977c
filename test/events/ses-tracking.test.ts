import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSqsPolling } from '../../src/events/sqs-poll.ts';
import { createLogger } from '../../src/platform/log.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { registry } from '../../src/platform/metrics.ts';
import { newId } from '../../src/platform/ids.ts';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSqs } from '../helpers/fake-sqs.ts';
import { waitFor } from '../helpers/wait.ts';
import { eventsOf, sentEmail, ses, snsEnvelope } from './fixtures.ts';

// SES's own Open and Click events (a configuration set that tracks them), through SNS into the
// events queue, arrive as the same email.opened and email.clicked Mailroom's tracking records (§15.3).
const sqs = await startFakeSqs();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SQS: sqs.endpoint } });
const { sql, config } = ctx;
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');

test('SES Open and Click via SQS: events with agent and machine, no IP, first times on the email, filtered webhook deliveries', async () => {
  const t = await ctx.tenant();
  const queueUrl = sqs.createQueue('ses-tracking-events');
  await connectProvider(sql, config, {
    projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'test-secret',
    configurationSet: 'mailroom', eventsQueueUrl: queueUrl,
  });
  const opensOnly = newId('webhook');
  const deliveredOnly = newId('webhook');
  await sql`insert into webhook_endpoints (id, project_id, url, secret_encrypted, event_types) values
    (${opensOnly}, ${t.projectId}, 'https://hooks.example.com/opens', ${Buffer.from('x')}, ${['email.opened']}::text[]),
    (${deliveredOnly}, ${t.projectId}, 'https://hooks.example.com/delivered', ${Buffer.from('x')}, ${['email.delivered']}::text[])`;
  const email = await sentEmail(sql, t.projectId, ['ann@example.net']);
  // SES's destination names every recipient, the hidden ones too; the events name only the visible.
  await sql`update emails set bcc_addresses = ${['hidden@example.net']}::text[] where id = ${email.id} and project_id = ${t.projectId}`;

  const metric = async (type: string) => (await registry.getSingleMetric('mailroom_tracking_events_total')!.get()).values.find((v) => v.labels.type === type)?.value ?? 0;
  const [opensBefore, clicksBefore] = [await metric('email.opened'), await metric('email.clicked')];
  const open = snsEnvelope(ses.open(email.providerMessageId));
  sqs.send(queueUrl, open);
  sqs.send(queueUrl, open); // at least once: the repeat records nothing
  sqs.send(queueUrl, JSON.stringify(ses.open(email.providerMessageId, 'Mozilla/5.0 (Macintosh) Thunderbird/115.0', '2025-03-01T12:30:00.000Z')));
  sqs.send(queueUrl, snsEnvelope(ses.click(email.providerMessageId, 'https://shop.example/orders/42')));

  const polling = await startSqsPolling({ config, sql, log }, { waitTimeSeconds: 1, refreshMs: 100, backoffBaseMs: 20, backoffMaxMs: 200 });
  try {
    await waitFor('queue drained', () => sqs.remaining(queueUrl) === 0);
  } finally {
    await polling.close();
  }

  const events = await eventsOf(sql, t.projectId, email.id);
  assert.deepEqual(events.map((e) => [e.type, e.data]), [
    ['email.opened', { to: ['ann@example.net'], user_agent: 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)', machine: true, tags: [] }],
    ['email.opened', { to: ['ann@example.net'], user_agent: 'Mozilla/5.0 (Macintosh) Thunderbird/115.0', machine: false, tags: [] }],
    ['email.clicked', { to: ['ann@example.net'], link: 'https://shop.example/orders/42', user_agent: ses.click('', '').click.userAgent, machine: false, tags: [] }],
  ]);
  assert.doesNotMatch(JSON.stringify(events), /192\.0\.2/, 'the client address SES reports is not stored');
  const [row] = await sql`select opened_at, clicked_at from emails where id = ${email.id} and project_id = ${t.projectId}`;
  assert.deepEqual({ ...row }, { openedAt: new Date('2025-03-01T12:00:00.000Z'), clickedAt: new Date('2025-03-01T12:01:00.000Z') });

  const deliveries = await sql<{ endpointId: string; type: string }[]>`
    select d.endpoint_id, e.type from webhook_deliveries d join events e on e.id = d.event_id and e.project_id = d.project_id
    where d.project_id = ${t.projectId} order by d.id`;
  assert.deepEqual(deliveries.map((d) => [d.endpointId, d.type]), [[opensOnly, 'email.opened'], [opensOnly, 'email.opened']], 'only the endpoint taking opens gets them');
  assert.equal(await metric('email.opened') - opensBefore, 2);
  assert.equal(await metric('email.clicked') - clicksBefore, 1);

  const resend = (await (await ctx.call(t.key, `/resend/emails/${email.id}`)).json()) as { last_event: string };
  assert.equal(resend.last_event, 'clicked');
});
