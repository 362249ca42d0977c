import { promises as dns, type LookupAddress } from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Config } from '../platform/config.ts';
import { ServiceError } from '../platform/errors.ts';

/**
 * Where webhooks may go. The rules apply to the resolved address, never to the URL
 * string, so they run at registration, at URL edit and again inside every delivery's connection.
 */

export type ResolvedAddress = { address: string; family: 4 | 6 };
/** Hostname → every address it resolves to. Injectable so tests can play DNS games. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export const systemResolver: Resolver = async (hostname) => {
  const answers = await dns.lookup(hostname, { all: true, order: 'verbatim' });
  return answers.map((a: LookupAddress) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

export type DestinationPolicy = {
  /** NODE_ENV=development: http and any address are allowed (rules 1 and 2 relaxed). */
  development: boolean;
  allowed: [ipaddr.IPv4 | ipaddr.IPv6, number][];
};

export function destinationPolicy(config: Pick<Config, 'development' | 'webhookAllowedCidrs'>): DestinationPolicy {
  return { development: config.development, allowed: config.webhookAllowedCidrs.map((c) => ipaddr.parseCIDR(c)) };
}

/** The message is for the operator registering the endpoint; deliveries record only `destination_blocked`. */
export class DestinationError extends ServiceError {
  constructor(message: string) { super('destination_refused', message); }
}

const MAX_URL_LENGTH = 2048;

const V4_BLOCKED: Record<string, string> = {
  unspecified: 'unspecified', broadcast: 'broadcast', multicast: 'multicast', linkLocal: 'link-local',
  loopback: 'loopback', carrierGradeNat: 'carrier-grade NAT', private: 'private', reserved: 'reserved',
};
/** IPv6 special ranges that are publicly routable; every other named range is refused. */
const V6_PUBLIC = new Set(['unicast', 'amt', 'as112v6']);
const V6_LABEL: Record<string, string> = {
  unspecified: 'unspecified', linkLocal: 'link-local', multicast: 'multicast', loopback: 'loopback',
  uniqueLocal: 'unique-local', deprecatedSiteLocal: 'site-local', rfc6052: 'local-use NAT64',
};
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');

/** The IPv4 address an IPv6 form carries: mapped, SIIT, well-known NAT64, 6to4, IPv4-compatible. */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  const p = ip.parts;
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const range = ip.range();
  if (range === 'ipv4Mapped' || range === 'rfc6145' || ip.match(NAT64)) return v4(p[6]!, p[7]!);
  if (range === '6to4') return v4(p[1]!, p[2]!);
  // ::a.b.c.d (deprecated IPv4-compatible), besides :: and ::1 which have ranges of their own.
  if (range === 'unicast' && p.slice(0, 6).every((x) => x === 0)) return v4(p[6]!, p[7]!);
  return undefined;
}

function isAllowedByCidr(ip: ipaddr.IPv4 | ipaddr.IPv6, policy: DestinationPolicy): boolean {
  return policy.allowed.length > 0 && ipaddr.subnetMatch(ip, { allowed: policy.allowed }, 'no') === 'allowed';
}

/** Why this address may not be contacted, or undefined when it may. */
export function blockedReason(address: string, policy: DestinationPolicy): string | undefined {
  if (!ipaddr.isValid(address)) return `${address} is not an IP address`;
  const ip = ipaddr.parse(address);
  const inner = ip.kind() === 'ipv6' ? embeddedIPv4(ip as ipaddr.IPv6) : undefined;
  if (policy.development || isAllowedByCidr(ip, policy) || (inner && isAllowedByCidr(inner, policy))) return undefined;
  if (inner) {
    const innerReason = blockedReason(inner.toString(), policy);
    return innerReason && `${address} embeds an IPv4 address: ${innerReason}`;
  }
  const range = ip.range();
  if (ip.kind() === 'ipv4') return V4_BLOCKED[range] && `${address} is a ${V4_BLOCKED[range]} address`;
  if (V6_PUBLIC.has(range)) return undefined;
  return `${address} is a ${V6_LABEL[range] ?? `special-purpose (${range})`} address`;
}

/** The rules that need no DNS: a well-formed https URL (http too in development). */
export function parseWebhookUrl(raw: string, policy: DestinationPolicy): URL {
  const text = raw.trim();
  if (text.length === 0 || text.length > MAX_URL_LENGTH) throw new DestinationError(`webhook URL must be 1 to ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try { url = new URL(text); } catch { throw new DestinationError('webhook URL is not a valid absolute URL'); }
  const schemes = policy.development ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) throw new DestinationError(`webhook URL must use ${policy.development ? 'http or https' : 'https'}`);
  if (!url.hostname) throw new DestinationError('webhook URL needs a host');
  if (url.username || url.password) throw new DestinationError('webhook URL must not carry a username or password');
  return url;
}

export function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** Registration and URL edits: every address the host resolves to must pass. Returns the normalised URL. */
export async function checkDestination(raw: string, policy: DestinationPolicy, resolve: Resolver = systemResolver): Promise<string> {
  const url = parseWebhookUrl(raw, policy);
  const host = bareHost(url.hostname);
  let addresses: ResolvedAddress[];
  if (net.isIP(host)) addresses = [{ address: host, family: net.isIP(host) as 4 | 6 }];
  else {
    try { addresses = await resolve(host); } catch { addresses = []; }
    if (addresses.length === 0) throw new DestinationError(`webhook URL host ${host} does not resolve`);
  }
  for (const { address } of addresses) {
    const reason = blockedReason(address, policy);
    if (reason) throw new DestinationError(`webhook URL is not allowed: ${reason} (WEBHOOK_ALLOWED_CIDRS can allow internal ranges)`);
  }
  return url.toString();
}
