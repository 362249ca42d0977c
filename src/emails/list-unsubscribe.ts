import type { Config } from '../platform/config.ts';
import { signUnsubscribeToken } from '../unsubscribe/token.ts';

/**
 * The one-click unsubscribe URL an email's `List-Unsubscribe` header carries, or undefined when
 * the email gets none. The one rule for composed API mail and for messages submitted over SMTP.
 */
export function listUnsubscribeUrl(config: Config, email: { projectId: string; emailId: string }): string | undefined {
  if (!config.publicBaseUrl) return undefined;
  return `${config.publicBaseUrl}/unsubscribe/${signUnsubscribeToken(config.secretKey, email)}`;
}
