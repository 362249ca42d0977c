import { createHmac, timingSafeEqual } from 'node:crypto';
import { deriveKey } from '../platform/crypto.ts';
import { ID_PREFIX } from '../platform/ids.ts';

/**
 * Tracking tokens: the project, the email and the link's position, with an HMAC under a key
 * derived from SECRET_KEY for this purpose alone. Binary and fixed-length, so a link stays short
 * (62 characters) and anything of another length is refused before any work:
 *
 *   project ULID (16 bytes) | email ULID (16) | link position (uint16) | HMAC-SHA256, first 12 bytes
 *
 * The kind (click or open) and the host the link was made for (the domain's tracking_domain or
 * PUBLIC_BASE_URL's) are not in the token but in the MAC's input, so an open token is not a click
 * token for link 0, and a token answers only on its own host (§18.11).
 */
export type TrackingKind = 'click' | 'open';
export type TrackingTarget = { projectId: string; emailId: string; link: number };

const MAC_BYTES = 12;
const BODY_BYTES = 16 + 16 + 2;
export const TOKEN_LENGTH = Math.ceil(((BODY_BYTES + MAC_BYTES) * 4) / 3);
const TOKEN = /^[A-Za-z0-9_-]+$/;
export const MAX_LINK_POSITION = 0xffff;

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const CROCKFORD_VALUE = new Map([...CROCKFORD].map((ch, i) => [ch, i]));

/** A 26-character ULID as its 128 bits (the first character carries only 3 of its 5 bits). */
function ulidBytes(ulid: string): Buffer | undefined {
  if (ulid.length !== 26) return undefined;
  let value = 0n;
  for (const ch of ulid) {
    const v = CROCKFORD_VALUE.get(ch);
    if (v === undefined) return undefined;
    value = (value << 5n) | BigInt(v);
  }
  if (value >> 128n) return undefined;
  return Buffer.from(value.toString(16).padStart(32, '0'), 'hex');
}

function ulidString(bytes: Buffer): string {
  let value = BigInt(`0x${bytes.toString('hex')}`);
  let out = '';
  for (let i = 0; i < 26; i++) {
    out = CROCKFORD[Number(value & 31n)]! + out;
    value >>= 5n;
  }
  return out;
}

/** A host as the MAC takes it: lower case, no port, no trailing dot. */
export const hostKey = (host: string) => host.toLowerCase().replace(/:\d+$/, '').replace(/\.$/, '');

function mac(secretKey: string, kind: TrackingKind, host: string, body: Buffer): Buffer {
  return createHmac('sha256', deriveKey(secretKey, 'tracking-tokens')).update(kind).update('\0').update(hostKey(host)).update('\0')
    .update(body).digest().subarray(0, MAC_BYTES);
}

/** The MAC of links sent before tokens named their host: the kind and the body alone. */
function hostlessMac(secretKey: string, kind: TrackingKind, body: Buffer): Buffer {
  return createHmac('sha256', deriveKey(secretKey, 'tracking-tokens')).update(kind).update(body).digest().subarray(0, MAC_BYTES);
}

/** A token for `target`, good only on `host` (the host name of the links' base). */
export function signTrackingToken(secretKey: string, kind: TrackingKind, target: TrackingTarget, host: string): string {
  const project = ulidBytes(target.projectId.slice(ID_PREFIX.project.length));
  const email = ulidBytes(target.emailId.slice(ID_PREFIX.email.length));
  if (!project || !email || !Number.isInteger(target.link) || target.link < 0 || target.link > MAX_LINK_POSITION) {
    throw new Error('a tracking token names a project id, an email id and a link position 0 to 65535');
  }
  const position = Buffer.alloc(2);
  position.writeUInt16BE(target.link);
  const body = Buffer.concat([project, email, position]);
  return Buffer.concat([body, mac(secretKey, kind, host, body)]).toString('base64url');
}

/**
 * The target of a genuine token requested on the host it was made for, or undefined for anything
 * altered, truncated, too long, not base64url, or asked for on another host. A token of a link
 * sent before tokens named their host comes back with `hostless`: the caller answers it only on
 * a host that project issues links on.
 */
export function verifyTrackingToken(secretKey: string, kind: TrackingKind, token: string, host: string): (TrackingTarget & { hostless?: true }) | undefined {
  if (token.length !== TOKEN_LENGTH || !TOKEN.test(token)) return undefined;
  const raw = Buffer.from(token, 'base64url');
  // The last character carries spare bits: only the one spelling of the bytes is genuine.
  if (raw.length !== BODY_BYTES + MAC_BYTES || raw.toString('base64url') !== token) return undefined;
  const body = raw.subarray(0, BODY_BYTES);
  const given = raw.subarray(BODY_BYTES);
  const hostless = !timingSafeEqual(given, mac(secretKey, kind, host, body));
  if (hostless && !timingSafeEqual(given, hostlessMac(secretKey, kind, body))) return undefined;
  return {
    projectId: ID_PREFIX.project + ulidString(body.subarray(0, 16)),
    emailId: ID_PREFIX.email + ulidString(body.subarray(16, 32)),
    link: body.readUInt16BE(32),
    ...(hostless ? { hostless: true as const } : {}),
  };
}
