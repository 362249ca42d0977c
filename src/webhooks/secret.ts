import type { Config } from '../platform/config.ts';
import { decrypt, deriveKey, encrypt, randomBase64url } from '../platform/crypto.ts';

/** `whsec_` + 32 random bytes in base64url. */
export function generateSigningSecret(): string {
  return `whsec_${randomBase64url(32)}`;
}

/** Secrets are stored sealed (AES-256-GCM) under a key of their own, derived from SECRET_KEY. */
export function sealSecret(config: Pick<Config, 'secretKey'>, secret: string): Buffer {
  return encrypt(deriveKey(config.secretKey, 'webhook-secrets'), secret);
}

export function openSecret(config: Pick<Config, 'secretKey'>, sealed: Buffer): string {
  return decrypt(deriveKey(config.secretKey, 'webhook-secrets'), sealed);
}
