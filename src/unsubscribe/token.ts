import { createHmac } from 'node:crypto';
import { deriveKey, safeEqual } from '../platform/crypto.ts';

export type UnsubscribeTarget = { projectId: string; emailId: string };

/** Keyed apart from the credential key by its own HKDF purpose. */
function mac(secretKey: string, payload: string): string {
  return createHmac('sha256', deriveKey(secretKey, 'unsubscribe-tokens')).update(`unsubscribe.v1.${payload}`).digest('base64url');
}

/** `<base64url JSON {p, e}>.<base64url HMAC-SHA256>`: URL-safe, names the project and the email. */
export function signUnsubscribeToken(secretKey: string, target: UnsubscribeTarget): string {
  const payload = Buffer.from(JSON.stringify({ p: target.projectId, e: target.emailId })).toString('base64url');
  return `${payload}.${mac(secretKey, payload)}`;
}

/** The target of a genuine token, or undefined for anything forged, altered or malformed. */
export function verifyUnsubscribeToken(secretKey: string, token: string): UnsubscribeTarget | undefined {
  if (token.length > 512) return undefined;
  const dot = token.indexOf('.');
  if (dot <= 0 || dot !== token.lastIndexOf('.')) return undefined;
  const payload = token.slice(0, dot);
  const signature = token.slice(dot + 1);
  if (!safeEqual(signature, mac(secretKey, payload))) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { p?: unknown; e?: unknown };
    if (typeof parsed.p !== 'string' || typeof parsed.e !== 'string') return undefined;
    return { projectId: parsed.p, emailId: parsed.e };
  } catch {
    return undefined;
  }
}
