import { timingSafeEqual } from 'node:crypto';
import type { Sql } from '../platform/db.ts';
import { GroupCommit, groupCommitPerPool } from '../platform/group-commit.ts';
import { findActiveKeysByHash, touchKey, type KeyMatch, type KeyPermission } from './queries.ts';
import { hashApiKey } from './service.ts';

const KEY_SHAPE = /^sk_[A-Za-z0-9_-]{43}$/;

export type AuthenticatedKey = { id: string; projectId: string; name: string; permission: KeyPermission };

/** Whether a string has the shape of an API key; anything else is never looked up. */
export function looksLikeApiKey(value: string | undefined): value is string {
  return value !== undefined && KEY_SHAPE.test(value);
}

/**
 * The active key presented, found by its SHA-256 and compared in constant time, or undefined
 * for a malformed, unknown or revoked key alike. Shared by the API and the SMTP sink.
 */
export async function verifyApiKey(sql: Sql, presented: string | undefined): Promise<AuthenticatedKey | undefined> {
  if (!looksLikeApiKey(presented)) return undefined;
  const hash = hashApiKey(presented);
  const match = await lookupFor(sql).run(hash);
  // Both are SHA-256 digests, so of one length: compared as they are, in constant time.
  if (!match || match.keyHash.length !== hash.length || !timingSafeEqual(match.keyHash, hash)) return undefined;
  return { id: match.id, projectId: match.projectId, name: match.name, permission: match.permission };
}

/**
 * Whether the key with this hash is still active, for a session that authenticated earlier (the
 * SMTP relay asks at each message). Lookups share the grouped query that authentication uses.
 */
export async function isKeyActive(sql: Sql, keyHash: Buffer): Promise<boolean> {
  const match = await lookupFor(sql).run(keyHash);
  return !!match && match.keyHash.length === keyHash.length && timingSafeEqual(match.keyHash, keyHash);
}

/**
 * Key lookups of requests that arrive together share one query. Nothing is remembered once the
 * query answers: every lookup starts after its request arrived and reads the table as it is, so a
 * key revoked before a request is refused by that request.
 */
const lookupFor = groupCommitPerPool((sql) => new GroupCommit<Buffer, KeyMatch | undefined>(async (hashes) => {
  const rows = await findActiveKeysByHash(sql, [...new Map(hashes.map((h) => [h.toString('hex'), h])).values()]);
  const byHash = new Map(rows.map((r) => [r.keyHash.toString('hex'), r]));
  return hashes.map((h) => byHash.get(h.toString('hex')));
}, { maxInFlight: 4 }));

/** How many key queries this process has made, for the tests that check lookups are shared. */
export function keyLookupQueries(sql: Sql): number {
  return lookupFor(sql).batchesWritten;
}

/**
 * Records a key's use for `last_used_at`, skipping the UPDATE when this process wrote it within
 * the minute; the SQL guard in `touchKey` covers the other replicas.
 */
export function keyUseRecorder(sql: Sql) {
  const lastTouched = new Map<string, number>();
  return async (key: AuthenticatedKey) => {
    const now = Date.now();
    if ((lastTouched.get(key.id) ?? 0) >= now - 60_000) return;
    lastTouched.set(key.id, now);
    if (lastTouched.size > 10_000) lastTouched.clear();
    await touchKey(sql, key.projectId, key.id);
  };
}
