import { randomBytes } from 'node:crypto';
import type { Config } from '../platform/config.ts';
import type { Sql } from '../platform/db.ts';
import { decrypt, deriveKey, encrypt } from '../platform/crypto.ts';

/**
 * `whsec_` + 32 random bytes in standard, padded base64 (44 characters): the form Standard
 * Webhooks libraries (standardwebhooks, svix, resend) expect.
 */
export function generateSigningSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Secrets made before the standard form were base64url without padding; same bytes, new spelling. */
const LEGACY = /^whsec_[A-Za-z0-9_-]{43}$/;

export function toStandardSecret(secret: string): string {
  return LEGACY.test(secret) ? `whsec_${Buffer.from(secret.slice(6), 'base64url').toString('base64')}` : secret;
}

/** The key Standard Webhooks signatures use: the base64-decoded part after `whsec_`. */
export function standardSigningKey(secret: string): Buffer {
  return Buffer.from(secret.slice('whsec_'.length), 'base64');
}

/**
 * Rewrites every stored secret still in the legacy spelling into the standard one, once, after
 * migrations (it needs SECRET_KEY, which SQL does not have). Returns how many were rewritten; a
 * secret sealed under another SECRET_KEY is left as it is.
 */
export async function reencodeLegacySecrets(sql: Sql, config: Pick<Config, 'secretKey'>): Promise<number> {
  const rows = await sql<{ id: string; projectId: string; secretEncrypted: Buffer }[]>`
    select id, project_id, secret_encrypted from webhook_endpoints`;
  let rewritten = 0;
  for (const row of rows) {
    let secret: string;
    try { secret = decrypt(deriveKey(config.secretKey, 'webhook-secrets'), row.secretEncrypted); } catch { continue; }
    if (!LEGACY.test(secret)) continue;
    await sql`update webhook_endpoints set secret_encrypted = ${sealSecret(config, toStandardSecret(secret))}, updated_at = now()
      where id = ${row.id} and project_id = ${row.projectId}`;
    rewritten++;
  }
  return rewritten;
}

/** Secrets are stored sealed (AES-256-GCM) under a key of their own, derived from SECRET_KEY. */
export function sealSecret(config: Pick<Config, 'secretKey'>, secret: string): Buffer {
  return encrypt(deriveKey(config.secretKey, 'webhook-secrets'), secret);
}

/** The secret as shown and signed with: always the standard spelling. */
export function openSecret(config: Pick<Config, 'secretKey'>, sealed: Buffer): string {
  return toStandardSecret(decrypt(deriveKey(config.secretKey, 'webhook-secrets'), sealed));
}
