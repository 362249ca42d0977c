import { randomUUID } from 'node:crypto';
import type { Sql } from '../../src/platform/db.ts';
import { newId } from '../../src/platform/ids.ts';

/** A domain of the project, verified, with receiving set up as POST …/receiving leaves it. */
export async function receivingDomain(sql: Sql, projectId: string, value: string) {
  const id = newId('domain');
  await sql`
    insert into domains (id, project_id, value, region, verification_status, receiving)
    values (${id}, ${projectId}, ${value}, 'us-east-1', 'success',
      ${sql.json({ status: 'active', bucket: 'inbound-mail', prefix: 'mail/', rule_set: 'mailroom', rule: `mailroom-${value}` })})`;
  return id;
}

type Verdict = 'PASS' | 'FAIL' | 'GRAY' | 'PROCESSING_FAILED' | 'DISABLED';

/** SES's `Received` notification, as a receipt rule's S3 or SNS action publishes it. */
export function receivedNotification(opts: {
  messageId?: string;
  recipients: string[];
  from?: string;
  subject?: string;
  action: { type: 'S3'; bucket: string; key: string } | { type: 'SNS'; content: Buffer; encoding?: 'BASE64' | 'UTF8' };
  verdicts?: Partial<Record<'spf' | 'dkim' | 'dmarc' | 'spam' | 'virus', Verdict>>;
  headers?: { name: string; value: string }[];
}) {
  const messageId = opts.messageId ?? randomUUID().replace(/-/g, '').slice(0, 20);
  const v = { spf: 'PASS', dkim: 'PASS', dmarc: 'PASS', spam: 'PASS', virus: 'PASS', ...opts.verdicts };
  const from = opts.from ?? 'Ann <ann@example.net>';
  const action = opts.action.type === 'S3'
    ? { type: 'S3', topicArn: 'arn:aws:sns:us-east-1:123456789012:ses-events', bucketName: opts.action.bucket, objectKeyPrefix: 'mail/', objectKey: opts.action.key }
    : { type: 'SNS', topicArn: 'arn:aws:sns:us-east-1:123456789012:ses-events', encoding: opts.action.encoding ?? 'BASE64' };
  return {
    notificationType: 'Received',
    mail: {
      timestamp: new Date().toISOString(),
      source: 'ann@example.net',
      messageId,
      destination: opts.recipients,
      headersTruncated: false,
      headers: opts.headers ?? [
        { name: 'From', value: from },
        { name: 'To', value: opts.recipients.join(', ') },
        { name: 'Subject', value: opts.subject ?? 'Hello' },
        { name: 'Message-ID', value: `<${messageId}@mail.example.net>` },
      ],
      commonHeaders: { returnPath: 'ann@example.net', from: [from], to: opts.recipients, messageId: `<${messageId}@mail.example.net>`, subject: opts.subject ?? 'Hello' },
    },
    receipt: {
      timestamp: new Date().toISOString(),
      processingTimeMillis: 420,
      recipients: opts.recipients,
      spamVerdict: { status: v.spam },
      virusVerdict: { status: v.virus },
      spfVerdict: { status: v.spf },
      dkimVerdict: { status: v.dkim },
      dmarcVerdict: { status: v.dmarc },
      action,
    },
    ...(opts.action.type === 'SNS' ? { content: opts.action.content.toString(opts.action.encoding === 'UTF8' ? 'utf8' : 'base64') } : {}),
  };
}

/** A reply with a PDF attachment, CRLF line ends, as a mail client writes one. */
export function replyMessage(opts: { to: string; subject?: string; inReplyTo?: string; messageId?: string; pdf?: Buffer; extraHeaders?: string } ) {
  const pdf = opts.pdf ?? Buffer.from('%PDF-1.4\n%\xe2\xe3\xcf\xd3\nfake pdf bytes\n', 'latin1');
  const lines = [
    'From: Ann Example <ann@example.net>',
    `To: ${opts.to}`,
    `Subject: ${opts.subject ?? 'Re: Your order'}`,
    `Message-ID: ${opts.messageId ?? `<${randomUUID()}@mail.example.net>`}`,
    ...(opts.inReplyTo ? [`In-Reply-To: ${opts.inReplyTo}`, `References: ${opts.inReplyTo}`] : []),
    ...(opts.extraHeaders ? [opts.extraHeaders] : []),
    'Date: Mon, 3 Mar 2025 10:05:00 +0000',
    'MIME-Version: 1.0',
    'Content-Type: multipart/mixed; boundary="b1"',
    '',
    '--b1',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Yes, please ship it.',
    '',
    'On Mon, 3 Mar 2025 at 10:00, Acme <app@acme.test> wrote:',
    '> Your order is ready.',
    '--b1',
    'Content-Type: application/pdf; name="invoice.pdf"',
    'Content-Disposition: attachment; filename="invoice.pdf"',
    'Content-Transfer-Encoding: base64',
    '',
    pdf.toString('base64').replace(/.{76}/g, '$&\r\n'),
    '--b1--',
    '',
  ];
  return { raw: Buffer.from(lines.join('\r\n')), pdf };
}
