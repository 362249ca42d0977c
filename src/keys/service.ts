import type { Sql } from '../platform/db.ts';
import { randomBase64url, sha256 } from '../platform/crypto.ts';
import { newId } from '../platform/ids.ts';
import { requireProject } from '../projects/service.ts';
import { ServiceError } from '../platform/errors.ts';
import * as q from './queries.ts';
import { recordAudit } from '../audit/record.ts';

export const KEY_PREFIX_LENGTH = 12;

/** `sk_` + 43 base64url characters (32 random bytes). Only its SHA-256 is stored. */
export function generateApiKey(): string {
  return `sk_${randomBase64url(32)}`;
}

export function hashApiKey(key: string): Buffer {
  return sha256(key);
}

function keyName(name: string) {
  const trimmed = name.trim();
  if (!trimmed || trimmed.length > 200) throw new ServiceError('invalid_input', 'key name must be 1 to 200 characters');
  return trimmed;
}

export async function createApiKey(sql: Sql, projectId: string, name: string, permission: string = 'full') {
  await requireProject(sql, projectId);
  const trimmed = keyName(name);
  if (!(q.KEY_PERMISSIONS as readonly string[]).includes(permission)) {
    throw new ServiceError('invalid_input', `permission must be one of ${q.KEY_PERMISSIONS.join(', ')}`);
  }
  const key = generateApiKey();
  const row = await sql.begin(async (tx) => {
    const inserted = await q.insertKey(tx, {
      id: newId('key'),
      projectId,
      name: trimmed,
      keyPrefix: key.slice(0, KEY_PREFIX_LENGTH),
      keyHash: hashApiKey(key),
      permission: permission as q.KeyPermission,
    });
    await recordAudit(tx, { action: 'api_key.created', projectId, target: { type: 'api_key', id: inserted.id }, changes: { name: inserted.name, permission: inserted.permission } });
    return inserted;
  });
  return { ...row, key };
}

/**
 * Revocation is permanent; revoking twice keeps the first time. Without `projectId` (the
 * operator CLI) the key's own project is used.
 */
export async function revokeApiKey(sql: Sql, projectId: string | undefined, keyId: string) {
  const owner = projectId ?? (await q.findKeyProject(sql, keyId));
  const row = owner ? await sql.begin(async (tx) => {
    const revoked = await q.revokeKey(tx, owner, keyId);
    // A second revocation changes nothing, so it is not a change to record.
    if (revoked?.newlyRevoked) await recordAudit(tx, { action: 'api_key.revoked', projectId: owner, target: { type: 'api_key', id: keyId }, changes: { name: revoked.name } });
    return revoked;
  }) : undefined;
  if (!row) throw new ServiceError('not_found', `key ${keyId} not found`);
  return row;
}

/**
 * Renames a key still in use. Entries already in the audit log keep the label the key had when
 * it acted; the rename itself records both names, so the trail reads across it.
 */
export async function renameApiKey(sql: Sql, projectId: string, keyId: string, name: string) {
  const trimmed = keyName(name);
  const row = await sql.begin(async (tx) => {
    const renamed = await q.renameKey(tx, projectId, keyId, trimmed);
    if (renamed && renamed.previousName !== trimmed) {
      await recordAudit(tx, { action: 'api_key.renamed', projectId, target: { type: 'api_key', id: keyId }, changes: { name: trimmed, previous_name: renamed.previousName } });
    }
    return renamed;
  });
  if (!row) throw new ServiceError('not_found', `key ${keyId} not found`);
  return row;
}
