import type { Context } from 'hono';
import { getConnInfo } from '@hono/node-server/conninfo';
import ipaddr from 'ipaddr.js';

function peerAddress(c: Context): string | undefined {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined; // in-process requests (tests) have no socket
  }
}

function trusted(address: string | undefined, trustProxy: boolean | string[]): boolean {
  if (trustProxy === true) return true;
  if (!trustProxy || !address) return false;
  try {
    let ip = ipaddr.parse(address);
    if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
    return trustProxy.some((cidr) => {
      const range = ipaddr.parseCIDR(cidr);
      return range[0].kind() === ip.kind() && ip.match(range);
    });
  } catch {
    return false;
  }
}

/**
 * The caller's address: the socket peer, or, when the peer is a trusted proxy, the rightmost
 * X-Forwarded-For entry that is not itself a trusted proxy. Entries further left were written by
 * the client and prove nothing. `TRUST_PROXY=true` trusts the connecting proxy only.
 */
export function clientIp(c: Context, trustProxy: boolean | string[]): string {
  const peer = peerAddress(c);
  if (!trusted(peer, trustProxy)) return peer ?? 'unknown';
  const hops = (c.req.header('x-forwarded-for') ?? '').split(',').map((h) => h.trim()).filter(Boolean);
  for (let i = hops.length - 1; i >= 0; i--) {
    if (trustProxy === true || !trusted(hops[i], trustProxy)) return hops[i]!;
  }
  return hops[0] ?? peer ?? 'unknown';
}

/** Whether the request arrived over https, directly or through a trusted proxy. */
export function isHttps(c: Context, trustProxy: boolean | string[]): boolean {
  if (new URL(c.req.url).protocol === 'https:') return true;
  return trusted(peerAddress(c), trustProxy) && c.req.header('x-forwarded-proto')?.split(',')[0]?.trim() === 'https';
}
