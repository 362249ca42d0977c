import { randomUUID } from 'node:crypto';
import type { Sql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';

/** SES event records shaped as SES publishes them through a configuration set. */
function mail(messageId: string, to: string[]) {
  return {
    timestamp: '2025-03-01T10:00:00.000Z',
    source: 'Sender <sender@example.com>',
    sourceArn: 'arn:aws:ses:us-east-1:123456789012:identity/example.com',
    sendingAccountId: '123456789012',
    messageId,
    destination: to,
    headersTruncated: false,
    tags: { 'ses:configuration-set': ['mailroom'] },
  };
}

export const ses = {
  send: (messageId: string, to = ['ann@example.net']) => ({ eventType: 'Send', mail: mail(messageId, to), send: {} }),
  delivery: (messageId: string, to = ['ann@example.net'], timestamp = '2025-03-01T10:00:02.000Z') => ({
    eventType: 'Delivery',
    mail: mail(messageId, to),
    delivery: {
      timestamp,
      processingTimeMillis: 2000,
      recipients: to,
      smtpResponse: '250 2.6.0 Message received',
      reportingMTA: 'a8-70.smtp-out.amazonses.com',
      remoteMtaIp: '127.0.2.0',
    },
  }),
  bounce: (messageId: string, bounceType: string, to = ['ann@example.net'], subType = 'General') => ({
    eventType: 'Bounce',
    mail: mail(messageId, to),
    bounce: {
      feedbackId: `fb-${messageId}-${bounceType}`,
      bounceType,
      bounceSubType: subType,
      bouncedRecipients: to.map((emailAddress) => ({
        emailAddress,
        action: 'failed',
        status: '5.1.1',
        diagnosticCode: 'smtp; 550 5.1.1 user unknown',
      })),
      timestamp: '2025-03-01T10:00:03.000Z',
      reportingMTA: 'dsn; a8-70.smtp-out.amazonses.com',
    },
  }),
  complaint: (messageId: string, to = ['ann@example.net'], feedbackType: string | null = 'abuse') => ({
    eventType: 'Complaint',
    mail: mail(messageId, to),
    complaint: {
      feedbackId: `fb-${messageId}-complaint`,
      complaintSubType: null,
      complainedRecipients: to.map((emailAddress) => ({ emailAddress })),
      timestamp: '2025-03-01T11:00:00.000Z',
      userAgent: 'Mozilla/5.0',
      ...(feedbackType ? { complaintFeedbackType: feedbackType } : {}),
      arrivalDate: '2025-03-01T10:59:00.000Z',
    },
  }),
  deliveryDelay: (messageId: string, to = ['ann@example.net']) => ({
    eventType: 'DeliveryDelay',
    mail: mail(messageId, to),
    deliveryDelay: {
      timestamp: '2025-03-01T10:05:00.000Z',
      delayType: 'TransientCommunicationFailure',
      expirationTime: '2025-03-02T10:00:00.000Z',
      delayedRecipients: to.map((emailAddress) => ({ emailAddress, status: '4.4.1', diagnosticCode: 'smtp; 421 4.4.1 try again later' })),
      reportingMTA: 'a8-70.smtp-out.amazonses.com',
    },
  }),
  reject: (messageId: string, to = ['ann@example.net']) => ({ eventType: 'Reject', mail: mail(messageId, to), reject: { reason: 'Bad content' } }),
  open: (messageId: string, userAgent = 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)', timestamp = '2025-03-01T12:00:00.000Z') => ({
    eventType: 'Open',
    mail: mail(messageId, ['ann@example.net', 'hidden@example.net']),
    open: { ipAddress: '192.0.2.1', timestamp, userAgent },
  }),
  click: (messageId: string, link: string, userAgent = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148') => ({
    eventType: 'Click',
    mail: mail(messageId, ['ann@example.net', 'hidden@example.net']),
    click: { ipAddress: '192.0.2.2', timestamp: '2025-03-01T12:01:00.000Z', userAgent, link, linkTags: { campaign: ['spring'] } },
  }),
  /** The older identity-notification form. */
  legacyBounce: (messageId: string, to = ['ann@example.net']) => ({
    notificationType: 'Bounce',
    mail: mail(messageId, to),
    bounce: {
      bounceType: 'Permanent',
      bounceSubType: 'Suppressed',
      bouncedRecipients: to.map((emailAddress) => ({ emailAddress, diagnosticCode: 'Amazon SES has suppressed sending to this address' })),
      timestamp: '2025-03-01T10:00:03.000Z',
      feedbackId: `fb-${messageId}-legacy`,
    },
  }),
};

/** An SNS envelope as SNS delivers it into an SQS queue with raw delivery off. */
export function snsEnvelope(record: unknown, topicArn = 'arn:aws:sns:us-east-1:123456789012:ses-events') {
  return JSON.stringify({
    Type: 'Notification',
    MessageId: randomUUID(),
    TopicArn: topicArn,
    Message: JSON.stringify(record),
    Timestamp: new Date().toISOString(),
    SignatureVersion: '1',
    Signature: 'c2lnbmF0dXJl',
    SigningCertURL: 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-abc.pem',
    UnsubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe',
  });
}

/** An email the provider has accepted, as the send task leaves it. */
export async function sentEmail(sql: Sql, projectId: string, to = ['Ann <Ann@Example.net>']) {
  const id = newId('email');
  const providerMessageId = `0100018f${randomUUID().replace(/-/g, '')}-000000`;
  await sql`
    insert into emails (id, project_id, status, from_address, to_addresses, subject, text, provider_message_id, sent_at)
    values (${id}, ${projectId}, 'sent', 'Sender <sender@example.com>', ${sql.array(to)}, 'Hello', 'Hi there', ${providerMessageId}, now())`;
  return { id, providerMessageId };
}

/** An active webhook endpoint; the secret is never used by these tests. */
export async function activeEndpoint(sql: Sql, projectId: string) {
  const id = newId('webhook');
  await sql`
    insert into webhook_endpoints (id, project_id, url, secret_encrypted)
    values (${id}, ${projectId}, 'https://hooks.example.com/mailroom', ${Buffer.from('not-a-real-secret')})`;
  return id;
}

export async function eventsOf(sql: Sql, projectId: string, emailId: string) {
  return sql<{ id: string; type: string; data: Record<string, unknown> }[]>`
    select id, type, data from events where project_id = ${projectId} and email_id = ${emailId} order by id`;
}
