import { ApiError } from '../http/errors.ts';
import { sha256 } from '../platform/crypto.ts';
import type { Sql, TxSql } from '../platform/db.ts';
import type { ParsedSend } from './validate.ts';

export type Accepted = { emailIds: string[]; replayed: boolean };

/**
 * SHA-256 of the validated request in a fixed order, so whitespace, key order and
 * `"to": "a"` versus `"to": ["a"]` don't make the same send look like a different one.
 */
export function fingerprint(send: ParsedSend): Buffer {
  const headers = Object.entries(send.headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return sha256(JSON.stringify([
    send.from, send.to, send.cc, send.bcc, send.replyTo, send.subject, send.html, send.text, headers,
    send.attachments.map((a) => [a.filename, a.contentType, a.content, a.contentId ?? null]),
    send.scheduledAt?.toISOString() ?? null,
    send.tags.map((t) => [t.name, t.value]),
    // Only when given, so the fingerprints of sends without them are what they always were.
    ...(send.trackOpens !== null || send.trackClicks !== null ? [[send.trackOpens, send.trackClicks]] : []),
    ...(send.topicId ? [['topic', send.topicId]] : []),
    // The template as asked for, not as rendered: a repeat after a publish is still a repeat.
    ...(send.template ? [[send.template.id, Object.entries(send.template.variables).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)), send.template.overrides]] : []),
  ]));
}

/** The fingerprint of a whole batch: its items' in order, marked so no single send can match it. */
export function batchFingerprint(items: ParsedSend[]): Buffer {
  return sha256(Buffer.concat([Buffer.from('batch'), ...items.map(fingerprint)]));
}

async function findLiveKey(sql: Sql, projectId: string, key: string) {
  const [row] = await sql<[{ emailIds: string[]; fingerprint: Buffer }?]>`
    select coalesce(email_ids, array[email_id]) as email_ids, fingerprint from idempotency_keys
    where project_id = ${projectId} and idempotency_key = ${key}
      and created_at > now() - interval '24 hours'`;
  return row;
}

/**
 * Takes the key for `emailId`. A live holder (committed, or committing concurrently: the insert
 * waits on its row lock) leaves us with nothing returned; a holder older than 24 h is replaced.
 */
async function claimKey(tx: TxSql, projectId: string, key: string, print: Buffer, emailIds: string[]): Promise<boolean> {
  const [row] = await tx`
    insert into idempotency_keys (project_id, idempotency_key, fingerprint, email_id, email_ids)
    values (${projectId}, ${key}, ${print}, ${emailIds[0]!}, ${emailIds}::text[])
    on conflict (project_id, idempotency_key) do update
      set fingerprint = excluded.fingerprint, email_id = excluded.email_id, email_ids = excluded.email_ids, created_at = now()
      where idempotency_keys.created_at <= now() - interval '24 hours'
    returning email_id`;
  return row !== undefined;
}

class KeyTaken extends Error {}

function replay(held: { emailIds: string[]; fingerprint: Buffer }, print: Buffer): Accepted {
  if (!held.fingerprint.equals(print)) {
    throw new ApiError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request body.');
  }
  return { emailIds: held.emailIds, replayed: true };
}

/** The first answer for a key already used in this project, or undefined when the key is free. */
export async function findReplay(sql: Sql, projectId: string, key: string, print: Buffer): Promise<Accepted | undefined> {
  const held = await findLiveKey(sql, projectId, key);
  return held ? replay(held, print) : undefined;
}

/**
 * Runs `create` (which writes the email and enqueues it) in one transaction together with the
 * key. Concurrent duplicates race on the primary key: the loser rolls its email back and answers
 * with the winner's id, so there is exactly one email and never a 5xx.
 */
export async function acceptOnce(
  sql: Sql,
  projectId: string,
  key: string | undefined,
  print: Buffer,
  create: (tx: TxSql) => Promise<string[]>,
): Promise<Accepted> {
  if (key === undefined) return { emailIds: await sql.begin((tx) => create(tx)), replayed: false };
  for (let attempt = 0; ; attempt++) {
    try {
      const emailIds = await sql.begin(async (tx) => {
        const ids = await create(tx);
        if (!(await claimKey(tx, projectId, key, print, ids))) throw new KeyTaken();
        return ids;
      });
      return { emailIds, replayed: false };
    } catch (err) {
      if (!(err instanceof KeyTaken) || attempt >= 5) throw err;
    }
    // The claim waited for the winner to commit, so its row is visible now. Should it vanish in
    // between (its project deleted), the key is free and the next round takes it.
    const seen = await findReplay(sql, projectId, key, print);
    if (seen) return seen;
  }
}
