/**
 * Whether an open or a click came from a machine rather than a person: an image proxy that
 * fetches every image when mail arrives, or a link scanner that follows every link before the
 * recipient sees it. Read from the User-Agent alone, since no client address is kept; the list
 * and what it cannot tell are in docs/tracking.md. Shared by Mailroom's own tracking and SES's
 * Open and Click events.
 */
const MACHINE_AGENTS: { name: string; pattern: RegExp }[] = [
  // Image proxies: they fetch the pixel once, on arrival or first display, for every recipient.
  { name: 'Gmail image proxy', pattern: /GoogleImageProxy|via ggpht\.com/i },
  { name: 'Yahoo Mail proxy', pattern: /YahooMailProxy/i },
  { name: 'Outlook.com / Microsoft image proxy', pattern: /OutlookMailProxy|Microsoft Outlook Image Proxy|BingPreview/i },
  // Apple Mail Privacy Protection prefetches through Apple's proxies with a bare agent string.
  { name: 'Apple Mail Privacy Protection', pattern: /^Mozilla\/5\.0$/ },
  // Link scanners of mail security gateways and chat link previews.
  { name: 'Microsoft Defender / Outlook Safe Links', pattern: /Microsoft Office Existence Discovery|ms-office|SafeLinks|MSOffice 16|Microsoft Defender/i },
  { name: 'Proofpoint URL Defense', pattern: /Proofpoint/i },
  { name: 'Mimecast', pattern: /Mimecast/i },
  { name: 'Barracuda', pattern: /Barracuda/i },
  { name: 'Cisco / IronPort', pattern: /IronPort|Cisco/i },
  { name: 'Symantec / Broadcom', pattern: /Symantec|Broadcom|MessageLabs/i },
  { name: 'Trend Micro', pattern: /Trend ?Micro/i },
  { name: 'Fortinet / Sophos / Zscaler', pattern: /Fortinet|FortiGuard|Sophos|Zscaler/i },
  { name: 'chat and social previews', pattern: /Slackbot|Twitterbot|facebookexternalhit|LinkedInBot|WhatsApp|TelegramBot|Discordbot|SkypeUriPreview|Teams/i },
  { name: 'crawlers and headless browsers', pattern: /[a-z]bot\/|\bbot\b|crawler|spider|HeadlessChrome|PhantomJS/i },
  { name: 'HTTP libraries', pattern: /^(curl|Wget|python-requests|python-urllib|Python|Go-http-client|Java|okhttp|axios|node-fetch|undici|libwww-perl|Apache-HttpClient)\b/i },
];

/** The names on the list, for the documentation and tests. */
export const MACHINE_AGENT_NAMES = MACHINE_AGENTS.map((a) => a.name);

/** True for a missing or empty agent too: every mail client and browser sends one. */
export function isMachineAgent(userAgent: string | undefined | null): boolean {
  const agent = userAgent?.trim();
  if (!agent) return true;
  return MACHINE_AGENTS.some((a) => a.pattern.test(agent));
}

/** Kept in events at most this long, and free of bytes PostgreSQL's jsonb refuses. */
export const MAX_USER_AGENT_CHARS = 512;
export function storedUserAgent(userAgent: string | undefined | null): string {
  // eslint-disable-next-line no-control-regex
  return (userAgent ?? '').slice(0, MAX_USER_AGENT_CHARS).replace(/[\u0000\uD800-\uDFFF]/g, '');
}
