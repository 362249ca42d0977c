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

/**
 * The unit failed attempts are counted by: an IPv4 address as it is, an IPv6 address by its /64.
 * One IPv6 subscriber or host is normally given a whole /64, so counting its single addresses
 * would hand it 2^64 fresh budgets. Anything that is not an address is counted as written.
 */
export function attemptSource(address: string): string {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    ip = ipaddr.parse(address);
  } catch {
    return address;
  }
  if (ip.kind() === 'ipv4') return ip.toString();
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const parts = v6.parts.slice(0, 4).concat([0, 0, 0, 0]);
  return `${new ipaddr.IPv6(parts).toString()}/64`;
}
