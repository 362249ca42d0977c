import addressparser from 'nodemailer/lib/addressparser';
import { ValidationError } from '../http/errors.ts';
import type { Config } from '../platform/config.ts';
import { listUnsubscribeUrl } from './list-unsubscribe.ts';
import type { ComposeInput } from './compose.ts';
import type { SendEmail } from './validate.ts';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/**
 * A size the assembled message can never exceed, from the input alone. The factors cover the
 * worst encodings MailComposer picks: quoted-printable (3 bytes a byte, plus soft breaks) for
 * text and text/* attachments, encoded words and folding for headers, base64 line breaks, and
 * LF becoming CRLF. test/emails/message-size.test.ts checks the bound against real output.
 */
export function sizeUpperBound(input: ComposeInput): number {
  let total = 8192 + 2 * (input.listUnsubscribeUrl?.length ?? 0) + 2 * (input.messageId?.length ?? 0);
  for (const s of [input.text, input.html]) if (s) total += 4 * bytes(s) + 512;
  for (const s of [input.from, input.subject, ...input.to, ...input.cc, ...input.bcc, ...input.replyTo]) total += 4 * bytes(s) + 128;
  for (const [name, value] of Object.entries(input.headers)) total += 4 * (bytes(name) + bytes(value)) + 128;
  for (const a of input.attachments) total += 3 * a.content.length + 8 * bytes(a.filename) + 2 * bytes(a.contentType) + 512;
  return total;
}

/**
 * The assembled-message limit (`EMAIL_MAX_MESSAGE_BYTES`, base64 attachments included). The message is composed as the worker will compose it,
 * with its Message-ID and unsubscribe header, so base64 inflation and MIME overhead count.
 * Composing costs about half a millisecond even for a small message, so it is skipped when the
 * upper bound already shows the message fits; MailComposer is loaded only then (4 MB of heap the
 * API otherwise never needs).
 */
export async function assertMessageSize(send: SendEmail, emailId: string, projectId: string, config: Config) {
  const input: ComposeInput = {
    ...send,
    // The sender's domain is part of the whole From value, so this is no shorter than the real one.
    messageId: `<${emailId}@${send.from}>`,
    listUnsubscribeUrl: listUnsubscribeUrl(config, { projectId, emailId, to: send.to, cc: send.cc, bcc: send.bcc }),
  };
  const limitBytes = config.emailMaxMessageBytes;
  if (sizeUpperBound(input) <= limitBytes) return;
  const domain = addressparser(send.from, { flatten: true })[0]?.address.split('@')[1] || 'mailroom';
  const { composeMime } = await import('./compose.ts');
  const sizeBytes = (await composeMime({ ...input, messageId: `<${emailId}@${domain}>` })).length;
  if (sizeBytes <= limitBytes) return;
  throw new ValidationError([{
    loc: ['body'],
    msg: `The assembled message is ${sizeBytes} bytes; the limit is ${limitBytes} bytes`,
    type: 'message_too_large',
    ctx: { limit_bytes: limitBytes, size_bytes: sizeBytes },
  }]);
}
