import { hmacSha256Hex } from '../platform/crypto.ts';

/**
 * `v1=` + lowercase hex HMAC-SHA256 of `"<timestamp>." + raw body`, keyed with the
 * whole `whsec_…` string as UTF-8. The `v1=` prefix leaves room for a later scheme.
 */
export function signWebhook(secret: string, timestamp: number, rawBody: string | Buffer): string {
  const signed = Buffer.concat([Buffer.from(`${timestamp}.`, 'utf8'), Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody, 'utf8')]);
  return `v1=${hmacSha256Hex(Buffer.from(secret, 'utf8'), signed)}`;
}
