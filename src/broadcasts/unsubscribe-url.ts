import type { Config } from '../platform/config.ts';
import { signContactToken } from '../unsubscribe/token.ts';

/**
 * The one-click link of a contact's copy of a broadcast, or of a send under a topic: it names the
 * contact and the topic, so the POST changes that subscription alone. Null without PUBLIC_BASE_URL.
 */
export function contactUnsubscribeUrl(config: Config, target: { projectId: string; contactId: string; topicId: string | null }): string | null {
  if (!config.publicBaseUrl) return null;
  return `${config.publicBaseUrl}/unsubscribe/${signContactToken(config.secretKey, target)}`;
}

/** RFC 8058's pair of headers for that link. */
export const oneClickHeaders = (url: string): Record<string, string> => ({
  'List-Unsubscribe': `<${url}>`,
  'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
});
