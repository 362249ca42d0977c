import { createHmac } from 'node:crypto';
import type { Config } from '../src/platform/config.ts';
import { deriveKey, safeEqual } from '../src/platform/crypto.ts';
import type { Sql } from '../src/platform/db.ts';
import type { Logger } from '../src/platform/log.ts';
import { ownerExists } from './owner.ts';

/**
 * The one-time setup link. In production an instance without an owner must not be claimable by
 * whoever finds it first: sign-up then needs this token, which only the operator sees (in the
 * API's start-up log) or bypasses with `cli owner create`. It is derived from SECRET_KEY, so
 * every API replica logs and accepts the same link, and it is worth nothing once an owner
 * exists, since sign-up closes for good then.
 */
export function ownerSetupToken(secretKey: string): string {
  return createHmac('sha256', deriveKey(secretKey, 'owner-setup')).update('owner-setup.v1').digest('base64url');
}

/** Whether sign-up may go ahead: always in development, else only with the setup token. */
export function setupAllowed(config: Pick<Config, 'development' | 'secretKey'>, token: string | undefined): boolean {
  if (config.development) return true;
  return typeof token === 'string' && token.length > 0 && token.length <= 128 && safeEqual(token, ownerSetupToken(config.secretKey));
}

/** `<PUBLIC_BASE_URL>/dashboard/signup?token=…`, or the listener's own URL without PUBLIC_BASE_URL. */
export function ownerSetupUrl(config: Pick<Config, 'publicBaseUrl' | 'secretKey'>, listeningUrl: string): string {
  return `${config.publicBaseUrl ?? listeningUrl}/dashboard/signup?token=${ownerSetupToken(config.secretKey)}`;
}

/** How soon the owner check is made again when the database did not answer it. */
const OWNER_CHECK_RETRY_MS = 1000;

/**
 * At an API's start in production, while no owner exists: one log line with the setup link. A
 * database restarting as the API starts does not stop the API: the check is made again each
 * second, in the background, until the database answers it.
 */
export async function logOwnerSetup(sql: Sql, config: Config, log: Logger, listeningUrl: string, attempt = 0): Promise<void> {
  if (config.development) return;
  let exists: boolean;
  try {
    exists = await ownerExists(sql);
  } catch (err) {
    if (attempt === 0) log.warn({ err: (err as Error).message }, 'could not look for an owner yet; trying again each second');
    setTimeout(() => void logOwnerSetup(sql, config, log, listeningUrl, attempt + 1), OWNER_CHECK_RETRY_MS).unref();
    return;
  }
  if (!exists) log.info({ setup_url: ownerSetupUrl(config, listeningUrl) }, 'owner setup');
}
