import { createHmac, createSecretKey } from 'node:crypto';
import { hmacSha256Hex } from '../platform/crypto.ts';
import { standardSigningKey } from './secret.ts';

/**
 * `v1=` + lowercase hex HMAC-SHA256 of `"<timestamp>." + raw body`, keyed with the
 * whole `whsec_…` string as UTF-8. The `v1=` prefix leaves room for a later scheme.
 */
export function signWebhook(secret: string, timestamp: number, rawBody: string | Buffer): string {
  const signed = Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody, 'utf8')]);
  return `v1=${hmacSha256Hex(secret, signed)}`;
}

/**
 * The Standard Webhooks headers: `webhook-id` (the event id, the same on every attempt),
 * `webhook-timestamp` and `webhook-signature` = `v1,` + base64 HMAC-SHA256 of
 * `"<id>.<timestamp>.<raw body>"`, keyed by the secret's decoded bytes.
 */
export function standardWebhookHeaders(secret: string, eventId: string, timestamp: number, rawBody: string): Record<string, string> {
  // A KeyObject: Node 24 prepares a Buffer key afresh on every HMAC, at several times the HMAC's cost.
  const signature = createHmac('sha256', createSecretKey(standardSigningKey(secret))).update(`${eventId}.${timestamp}.${rawBody}`).digest('base64');
  return { 'webhook-id': eventId, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` };
}
