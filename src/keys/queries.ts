import type { Sql, TxSql } from '../platform/db.ts';

export type ApiKeyRow = {
  id: string;
  projectId: string;
  name: string;
  keyPrefix: string;
  permission: KeyPermission;
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
};

export const KEY_PERMISSIONS = ['full', 'sending'] as const;
export type KeyPermission = (typeof KEY_PERMISSIONS)[number];

export type KeyMatch = { id: string; projectId: string; name: string; keyHash: Buffer; lastUsedAt: Date | null; permission: KeyPermission };

/**
 * Authentication is the one lookup that finds the project rather than filtering by it. Many
 * presented keys in one query; the active ones come back (match them by `keyHash`).
 */
export async function findActiveKeysByHash(sql: Sql, keyHashes: Buffer[]) {
  return sql<KeyMatch[]>`
    select id, project_id, name, key_hash, last_used_at, permission from api_keys
    where key_hash in (select decode(h, 'hex') from unnest(${keyHashes.map((k) => k.toString('hex'))}::text[]) h)
      and revoked_at is null`;
}

export async function insertKey(sql: Sql | TxSql, key: { id: string; projectId: string; name: string; keyPrefix: string; keyHash: Buffer; permission: KeyPermission }) {
  const [row] = await sql<ApiKeyRow[]>`
    insert into api_keys (id, project_id, name, key_prefix, key_hash, permission)
    values (${key.id}, ${key.projectId}, ${key.name}, ${key.keyPrefix}, ${key.keyHash}, ${key.permission})
    returning id, project_id, name, key_prefix, permission, created_at, last_used_at, revoked_at`;
  return row!;
}

export async function listKeys(sql: Sql, projectId: string) {
  return sql<ApiKeyRow[]>`
    select id, project_id, name, key_prefix, permission, created_at, last_used_at, revoked_at
    from api_keys where project_id = ${projectId} order by id desc`;
}

/** `newlyRevoked` is false when the key was revoked already (its first time is kept). */
export async function revokeKey(sql: Sql | TxSql, projectId: string, keyId: string) {
  const [row] = await sql<[(ApiKeyRow & { newlyRevoked: boolean })?]>`
    update api_keys k set revoked_at = coalesce(k.revoked_at, now())
    from (select id, revoked_at from api_keys where id = ${keyId} and project_id = ${projectId} for update) prev
    where k.id = prev.id and k.project_id = ${projectId}
    returning k.id, k.project_id, k.name, k.key_prefix, k.permission, k.created_at, k.last_used_at, k.revoked_at,
      prev.revoked_at is null as newly_revoked`;
  return row;
}

/** A key still in use gets a new name; `previousName` is the one it had. Undefined when not the project's or revoked. */
export async function renameKey(sql: Sql | TxSql, projectId: string, keyId: string, name: string) {
  const [row] = await sql<[(ApiKeyRow & { previousName: string })?]>`
    update api_keys k set name = ${name}
    from (select id, name from api_keys where id = ${keyId} and project_id = ${projectId} and revoked_at is null for update) prev
    where k.id = prev.id and k.project_id = ${projectId}
    returning k.id, k.project_id, k.name, k.key_prefix, k.permission, k.created_at, k.last_used_at, k.revoked_at,
      prev.name as previous_name`;
  return row;
}

export async function findKeyProject(sql: Sql, keyId: string) {
  const [row] = await sql<[{ projectId: string }?]>`select project_id from api_keys where id = ${keyId}`;
  return row?.projectId;
}

/** The where clause keeps it to one write a minute per key even across API replicas. */
export async function touchKey(sql: Sql, projectId: string, keyId: string) {
  await sql`
    update api_keys set last_used_at = date_trunc('second', now())
    where id = ${keyId} and project_id = ${projectId}
      and (last_used_at is null or last_used_at < now() - interval '1 minute')`;
}

/**
 * A page of the project's keys still in use, newest first (Resend's `after`/`before` paging):
 * under `/resend` a revoked key is a removed one.
 */
export async function listActiveKeysPage(sql: Sql, projectId: string, opts: { limit: number; after?: string; before?: string }) {
  const rows = opts.before
    ? (await sql<ApiKeyRow[]>`
        select id, project_id, name, key_prefix, permission, created_at, last_used_at, revoked_at
        from api_keys where project_id = ${projectId} and revoked_at is null and id > ${opts.before}
        order by id asc limit ${opts.limit + 1}`).reverse()
    : await sql<ApiKeyRow[]>`
        select id, project_id, name, key_prefix, permission, created_at, last_used_at, revoked_at
        from api_keys where project_id = ${projectId} and revoked_at is null
          ${opts.after ? sql`and id < ${opts.after}` : sql``}
        order by id desc limit ${opts.limit + 1}`;
  const hasMore = rows.length > opts.limit;
  return { rows: opts.before ? rows.slice(Math.max(0, rows.length - opts.limit)) : rows.slice(0, opts.limit), hasMore };
}

export async function findKey(sql: Sql, projectId: string, keyId: string) {
  const [row] = await sql<[ApiKeyRow?]>`
    select id, project_id, name, key_prefix, permission, created_at, last_used_at, revoked_at
    from api_keys where id = ${keyId} and project_id = ${projectId}`;
  return row;
}
