import type { Config } from '../platform/config.ts';
import { signUnsubscribeToken, soleRecipient } from '../unsubscribe/token.ts';

/**
 * The one-click unsubscribe URL an email's `List-Unsubscribe` header carries, or undefined when
 * the email gets none. The one rule for composed API mail and for messages submitted over SMTP:
 * only an email with exactly one recipient across to, cc and bcc gets one, and its token names
 * that address, so no recipient's click ever suppresses another, hidden or not.
 */
export function listUnsubscribeUrl(config: Config, email: {
  projectId: string; emailId: string; to: readonly string[]; cc: readonly string[]; bcc: readonly string[];
}): string | undefined {
  const recipient = soleRecipient(email.to, email.cc, email.bcc);
  if (!config.publicBaseUrl || recipient === undefined) return undefined;
  return `${config.publicBaseUrl}/unsubscribe/${signUnsubscribeToken(config.secretKey, { projectId: email.projectId, emailId: email.emailId, recipient })}`;
}
