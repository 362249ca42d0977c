import { createHmac } from 'node:crypto';
import { deriveKey, safeEqual } from '../platform/crypto.ts';

/** The one recipient whose unsubscribe this is; tokens minted before it was named carry none. */
export type UnsubscribeTarget = { projectId: string; emailId: string; recipient?: string };

/**
 * The address List-Unsubscribe may speak for: the email's only recipient across to, cc and bcc.
 * An email to several people gets no unsubscribe link, since one recipient's click must never
 * suppress another, hidden or not.
 */
export function soleRecipient(to: readonly string[], cc: readonly string[], bcc: readonly string[]): string | undefined {
  return to.length + cc.length + bcc.length === 1 ? (to[0] ?? cc[0] ?? bcc[0]) : undefined;
}

/** Keyed apart from the credential key by its own HKDF purpose. */
function mac(secretKey: string, payload: string): string {
  return createHmac('sha256', deriveKey(secretKey, 'unsubscribe-tokens')).update(`unsubscribe.v1.${payload}`).digest('base64url');
}

/** `<base64url JSON {p, e, r}>.<base64url HMAC-SHA256>`: URL-safe, names the project, the email and the recipient. */
export function signUnsubscribeToken(secretKey: string, target: UnsubscribeTarget & { recipient: string }): string {
  const payload = Buffer.from(JSON.stringify({ p: target.projectId, e: target.emailId, r: target.recipient })).toString('base64url');
  return `${payload}.${mac(secretKey, payload)}`;
}

/** The target of a genuine token, or undefined for anything forged, altered or malformed. */
export function verifyUnsubscribeToken(secretKey: string, token: string): UnsubscribeTarget | undefined {
  if (token.length > 1024) return undefined;
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.')) return undefined;
  const payload = token.slice(0, dot);
  const signature = token.slice(dot + 1);
  if (!safeEqual(signature, mac(secretKey, payload))) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { p?: unknown; e?: unknown; r?: unknown };
    if (typeof parsed.p !== 'string' || typeof parsed.e !== 'string') return undefined;
    if (parsed.r !== undefined && typeof parsed.r !== 'string') return undefined;
    return { projectId: parsed.p, emailId: parsed.e, ...(typeof parsed.r === 'string' ? { recipient: parsed.r } : {}) };
  } catch {
    return undefined;
  }
}

/** A broadcast recipient's link: it names the contact and the topic it was sent under, if any. */
export type ContactUnsubscribeTarget = { projectId: string; contactId: string; topicId: string | null };

function contactMac(secretKey: string, payload: string): string {
  // The same key as email tokens, a different domain: neither kind of token verifies as the other.
  return createHmac('sha256', deriveKey(secretKey, 'unsubscribe-tokens')).update(`unsubscribe.contact.v1.${payload}`).digest('base64url');
}

/** `c.<base64url JSON {p, c, t}>.<base64url HMAC-SHA256>`. */
export function signContactToken(secretKey: string, target: ContactUnsubscribeTarget): string {
  const payload = Buffer.from(JSON.stringify({ p: target.projectId, c: target.contactId, t: target.topicId })).toString('base64url');
  return `c.${payload}.${contactMac(secretKey, payload)}`;
}

export function verifyContactToken(secretKey: string, token: string): ContactUnsubscribeTarget | undefined {
  if (token.length > 1024 || !token.startsWith('c.')) return undefined;
  const rest = token.slice(2);
  const dot = rest.indexOf('.');
  if (dot <= 0 || dot !== rest.lastIndexOf('.')) return undefined;
  const payload = rest.slice(0, dot);
  if (!safeEqual(rest.slice(dot + 1), contactMac(secretKey, payload))) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { p?: unknown; c?: unknown; t?: unknown };
    if (typeof parsed.p !== 'string' || typeof parsed.c !== 'string') return undefined;
    if (parsed.t !== null && typeof parsed.t !== 'string') return undefined;
    return { projectId: parsed.p, contactId: parsed.c, topicId: parsed.t };
  } catch {
    return undefined;
  }
}
