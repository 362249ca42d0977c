import { SendEmailCommand } from '@aws-sdk/client-sesv2';
import type { Config } from '../platform/config.ts';
import type { ProviderConnection } from './connections.ts';
import { sesClientFor } from './ses-client.ts';
import { SlotMissed } from './errors.ts';

/** An attempt that hangs is abandoned and retried later rather than holding a worker slot. */
const SEND_TIMEOUT_MS = 30_000;

export type SesEnvelope = { to: string[]; cc: string[]; bcc: string[]; tags?: { name: string; value: string }[] };

/**
 * Sends assembled MIME through SES v2 `SendEmail` (Raw). The destination is passed explicitly:
 * it is the envelope, so Bcc recipients (absent from the headers) receive the message and
 * suppressed ones do not. Errors are thrown as the SDK raised them, for `classifySendError`.
 * With `leaveBy`, the request is checked against it once signed, as it is handed to the HTTP
 * client: the last moment before it can reach SES.
 */
export async function sendWithSes(
  config: Config,
  conn: ProviderConnection,
  raw: Buffer,
  envelope: SesEnvelope,
  leaveBy?: number,
): Promise<{ messageId: string }> {
  const client = sesClientFor(config, conn);
  const command = new SendEmailCommand({
    Content: { Raw: { Data: raw } },
    Destination: {
      ToAddresses: envelope.to.length ? envelope.to : undefined,
      CcAddresses: envelope.cc.length ? envelope.cc : undefined,
      BccAddresses: envelope.bcc.length ? envelope.bcc : undefined,
    },
    ...(conn.configurationSet ? { ConfigurationSetName: conn.configurationSet } : {}),
    // The email's tags, so SES events and CloudWatch dimensions can carry them too.
    ...(envelope.tags?.length ? { EmailTags: envelope.tags.map((t) => ({ Name: t.name, Value: t.value })) } : {}),
  });
  if (leaveBy !== undefined) {
    command.middlewareStack.add((next) => (args) => {
      if (performance.now() > leaveBy) throw new SlotMissed();
      return next(args);
    }, { step: 'finalizeRequest', priority: 'low', name: 'mailroomSendSlot' });
  }
  const result = await client.send(command, { abortSignal: AbortSignal.timeout(SEND_TIMEOUT_MS) });
  if (!result.MessageId) throw Object.assign(new Error('SES accepted the request without a MessageId'), { name: 'InternalFailure' });
  return { messageId: result.MessageId };
}
