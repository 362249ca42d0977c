import { createCipheriv, createDecipheriv, createHash, createHmac, createSecretKey, hkdfSync, randomBytes, timingSafeEqual, type KeyObject } from 'node:crypto';

/** Purposes of keys derived from SECRET_KEY; each gets its own HKDF output so one leak doesn't spread. */
export type KeyPurpose = 'provider-credentials' | 'webhook-secrets' | 'unsubscribe-tokens' | 'sink-internal' | 'owner-setup' | 'tracking-tokens' | 'inbound-downloads' | 'oidc-state';

const derived = new Map<string, KeyObject>();

/**
 * Memoised: hot paths (every send, every delivery) derive the same few keys. Kept as KeyObjects:
 * Node 24 prepares a Buffer key afresh on every cipher or HMAC, at five times the cost of the
 * operation itself on a short input.
 */
export function deriveKey(secretKey: string, purpose: KeyPurpose): KeyObject {
  const id = `${purpose}\u0000${secretKey}`;
  let key = derived.get(id);
  if (!key) {
    key = createSecretKey(Buffer.from(hkdfSync('sha256', secretKey, 'mailroom', `mailroom:${purpose}:v1`, 32)));
    if (derived.size > 64) derived.clear();
    derived.set(id, key);
  }
  return key;
}

export function sha256(data: string | Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}

/** A string key is taken as its UTF-8 bytes. */
export function hmacSha256Hex(key: string | KeyObject, data: string | Buffer): string {
  return createHmac('sha256', key).update(data).digest('hex');
}

/** Constant-time equality that also hides length differences behind a hash. */
export function safeEqual(a: string | Buffer, b: string | Buffer): boolean {
  return timingSafeEqual(sha256(a), sha256(b));
}

export function randomBase64url(bytes: number): string {
  return randomBytes(bytes).toString('base64url');
}

/** AES-256-GCM: 12-byte nonce || ciphertext || 16-byte tag. */
export function encrypt(key: KeyObject, plaintext: string): Buffer {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, body, cipher.getAuthTag()]);
}

export function decrypt(key: KeyObject, sealed: Buffer): string {
  const iv = sealed.subarray(0, 12);
  const tag = sealed.subarray(sealed.length - 16);
  const decipher = createDecipheriv('aes-256-gcm', key, iv);
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(sealed.subarray(12, sealed.length - 16)), decipher.final()]).toString('utf8');
}
