import { createHmac, timingSafeEqual } from 'node:crypto';
import { deriveKey } from '../platform/crypto.ts';
import { isWellFormedId } from '../platform/ids.ts';

/** How long a download link works (§20.3). */
export const DOWNLOAD_TTL_MS = 3600_000;

export type DownloadTarget = { projectId: string; receivedId: string; /** an attachment id, or `raw` */ part: string; expiresAt: number };

const PART = /^(raw|att_[0-9A-Za-z]{1,40})$/;

function mac(secretKey: string, body: string): Buffer {
  return createHmac('sha256', deriveKey(secretKey, 'inbound-downloads')).update(body).digest().subarray(0, 16);
}

/**
 * A link that works without a key until it expires: the project, the received email, the part
 * and the expiry in the path, with an HMAC under a key derived for this purpose alone.
 */
export function downloadPath(secretKey: string, t: Omit<DownloadTarget, 'expiresAt'>, now = Date.now()) {
  const expiresAt = Math.floor((now + DOWNLOAD_TTL_MS) / 1000);
  const body = `${t.projectId}.${t.receivedId}.${t.part}.${expiresAt}`;
  return { path: `/inbound/files/${body}.${mac(secretKey, body).toString('base64url')}`, expiresAt: new Date(expiresAt * 1000) };
}

/** The target of a genuine, unexpired link; undefined for anything else. */
export function verifyDownload(secretKey: string, token: string, now = Date.now()): DownloadTarget | undefined {
  if (token.length > 300) return undefined;
  const parts = token.split('.');
  if (parts.length !== 5) return undefined;
  const [projectId = '', receivedId = '', part = '', expires = '', signature = ''] = parts;
  if (!isWellFormedId('project', projectId) || !isWellFormedId('received', receivedId) || !PART.test(part) || !/^\d{1,12}$/.test(expires)) return undefined;
  const given = Buffer.from(signature, 'base64url');
  const expected = mac(secretKey, parts.slice(0, 4).join('.'));
  if (given.length !== expected.length || given.toString('base64url') !== signature || !timingSafeEqual(given, expected)) return undefined;
  const expiresAt = Number(expires);
  if (expiresAt * 1000 < now) return undefined;
  return { projectId, receivedId, part, expiresAt };
}
