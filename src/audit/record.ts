import type { TxSql } from '../platform/db.ts';
import { newId } from '../platform/ids.ts';
import { currentActor, type Actor } from './actor.ts';

/** The actions of CONTRACT §21.4. Add one here when a new kind of change is made. */
export const AUDIT_ACTIONS = [
  'project.created',
  'api_key.created', 'api_key.renamed', 'api_key.revoked',
  'webhook.created', 'webhook.updated', 'webhook.deleted', 'webhook.secret_rotated',
  'domain.created', 'domain.updated', 'domain.deleted', 'domain.receiving_enabled', 'domain.receiving_disabled',
  'template.created', 'template.updated', 'template.published', 'template.deleted',
  'suppression.added', 'suppression.removed',
  'provider.connected', 'provider.disconnected',
  'member.invited', 'member.invitation_withdrawn', 'member.joined', 'member.role_changed', 'member.removed', 'member.signed_in',
  'sink.cleared',
  'reputation.settings_changed', 'reputation.paused', 'reputation.resumed',
  'contact.created', 'contact.updated', 'contact.deleted', 'contact.segment_added', 'contact.segment_removed', 'contact.topics_updated',
  'contact_property.created', 'contact_property.updated', 'contact_property.deleted',
  'segment.created', 'segment.updated', 'segment.deleted',
  'topic.created', 'topic.updated', 'topic.deleted',
  'contact_import.created',
  'broadcast.created', 'broadcast.updated', 'broadcast.deleted', 'broadcast.scheduled', 'broadcast.send_started', 'broadcast.canceled',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/**
 * The only fields an entry's `changes` may hold, per target type. An entry is built from this
 * list, not from the row that changed, so a key, a signing secret, a password or an AWS secret
 * can never reach the log: a field not named here is dropped. Add a target type, or a field,
 * here when you record a new kind of change, and never one that holds a secret.
 */
export const AUDIT_FIELDS = {
  project: ['name'],
  api_key: ['name', 'previous_name', 'permission'],
  webhook: ['url', 'enabled', 'event_types'],
  domain: ['name', 'region', 'mail_from_domain', 'open_tracking', 'click_tracking', 'tracking_domain', 'bucket', 'prefix'],
  template: ['name', 'alias', 'fields', 'version'],
  suppression: ['address', 'reason'],
  provider: ['provider', 'region', 'configuration_set', 'events_queue_url', 'sns_topic_arn', 'max_send_rate'],
  member: ['email', 'role', 'method', 'replaced'],
  sink: ['removed'],
  reputation: ['reason', 'paused', 'bounce_rate', 'complaint_rate', 'bounce_threshold', 'complaint_threshold'],
  contact: ['email', 'fields', 'segment_id', 'topic_ids'],
  contact_property: ['key', 'type', 'fallback_value'],
  segment: ['name'],
  topic: ['name', 'description', 'default_subscription', 'visibility'],
  contact_import: ['on_conflict', 'segment_ids', 'topic_ids', 'bytes'],
  broadcast: ['name', 'segment_id', 'topic_id', 'subject', 'fields', 'status', 'scheduled_at', 'duplicate_of'],
} as const satisfies Record<string, readonly string[]>;
export type AuditTargetType = keyof typeof AUDIT_FIELDS;

type Scalar = string | number | boolean | null;
export type AuditChanges = Record<string, Scalar | Scalar[] | undefined>;

export type AuditEntry<T extends AuditTargetType = AuditTargetType> = {
  action: AuditAction;
  /** Null for changes to the instance itself (members). */
  projectId: string | null;
  target: { type: T; id: string | null };
  /** What the change set, by field; fields left out or undefined are not recorded. */
  changes?: Partial<Record<(typeof AUDIT_FIELDS)[T][number], Scalar | Scalar[] | undefined>> | null;
  /** Who acted; by default the request's or command's actor (actor.ts). */
  actor?: Actor;
};

/** Full-length keys and signing secrets, should one ever be typed into a name or an address. */
const SECRET_SHAPE = /\b(sk_[A-Za-z0-9_-]{20,}|whsec_[A-Za-z0-9+/=_-]{16,})/g;
const MAX_TEXT = 500;

function clean(value: Scalar): Scalar {
  if (typeof value !== 'string') return typeof value === 'number' && !Number.isFinite(value) ? null : value;
  return value.replace(SECRET_SHAPE, '[redacted]').slice(0, MAX_TEXT);
}

/** The allowed fields of `changes`, scalars and lists of scalars only; null when nothing is left. */
export function sanitizeChanges(type: AuditTargetType, changes: AuditEntry['changes']): Record<string, Scalar | Scalar[]> | null {
  if (!changes) return null;
  const out: Record<string, Scalar | Scalar[]> = {};
  for (const field of AUDIT_FIELDS[type] as readonly string[]) {
    const value = (changes as Record<string, unknown>)[field];
    if (value === undefined) continue;
    if (Array.isArray(value)) out[field] = value.filter((v) => v === null || ['string', 'number', 'boolean'].includes(typeof v)).slice(0, 100).map(clean);
    else if (value === null || ['string', 'number', 'boolean'].includes(typeof value)) out[field] = clean(value as Scalar);
  }
  return Object.keys(out).length ? out : null;
}

/**
 * Records one change in the audit log. Call it with the transaction that makes the change, as
 * `graphile_worker.add_job` is called with the one that writes a job's row: the change and its
 * entry commit together or not at all. The type asks for a transaction, so a plain pool cannot
 * be passed by mistake.
 *
 *   await sql.begin(async (tx) => {
 *     const row = await insertThing(tx, …);
 *     await recordAudit(tx, { action: 'thing.created', projectId, target: { type: 'thing', id: row.id }, changes: { name } });
 *   });
 */
export async function recordAudit<T extends AuditTargetType>(tx: TxSql, entry: AuditEntry<T>): Promise<void> {
  const actor = entry.actor ?? currentActor();
  const changes = sanitizeChanges(entry.target.type, entry.changes);
  await tx`
    insert into audit_log (id, actor_type, actor_id, actor_label, action, project_id, target_type, target_id, ip, changes)
    values (${newId('audit')}, ${actor.type}, ${actor.id}, ${actor.label}, ${entry.action}, ${entry.projectId},
      ${entry.target.type}, ${entry.target.id}, ${actor.ip}, ${changes === null ? null : tx.json(changes)})`;
}

/**
 * A webhook URL as the log shows it: its origin only. The path and query of many endpoints are
 * their credential (chat incoming-webhook URLs), and userinfo is one by definition.
 */
export function auditUrl(url: string | null | undefined): string | null | undefined {
  if (url == null) return url;
  try {
    const u = new URL(url);
    return u.pathname === '/' && !u.search ? u.origin : `${u.origin}/…`;
  } catch {
    return null;
  }
}
