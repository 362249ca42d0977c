import type { Sql, TxSql } from '../platform/db.ts';
import { ServiceError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import * as q from './queries.ts';
import type { Role } from './roles.ts';
import { recordAudit } from '../audit/record.ts';
import type { Actor } from '../audit/actor.ts';

/**
 * Changing and removing members. Who may do it is the dashboard's table (dashboard/permissions.ts);
 * what must always hold is here: the instance keeps an owner, and a changed or removed member's
 * sessions end in the same transaction, so their next request already sees the change.
 */

async function requireMember(tx: TxSql, id: string) {
  const member = await q.getMember(tx, id);
  if (!member) throw new ServiceError('not_found', 'There is no such member.');
  return member;
}

async function keepAnOwner(tx: TxSql, memberId: string, what: string) {
  const owners = await q.lockOwners(tx);
  if (owners.length <= 1 && owners.some((o) => o.id === memberId)) {
    throw new ServiceError('conflict', `The last owner cannot be ${what}: make another member an owner first.`);
  }
}

export async function endSessionsOf(tx: Sql | TxSql, memberId: string) {
  await tx`delete from dashboard_sessions where member_id = ${memberId}`;
}

export type MemberChange = { id: string; email: string; from: Role; to: Role };

export async function changeRole(sql: Sql, memberId: string, role: Role): Promise<MemberChange> {
  return sql.begin(async (tx) => {
    const member = await requireMember(tx, memberId);
    if (member.role === role) return { id: member.id, email: member.email, from: member.role, to: role };
    if (member.role === 'owner') await keepAnOwner(tx, member.id, 'demoted');
    await tx`update members set role = ${role} where id = ${member.id}`;
    await endSessionsOf(tx, member.id);
    await recordAudit(tx, { action: 'member.role_changed', projectId: null, target: { type: 'member', id: member.id }, changes: { email: member.email, role } });
    return { id: member.id, email: member.email, from: member.role, to: role };
  });
}

export async function removeMember(sql: Sql, memberId: string) {
  return sql.begin(async (tx) => {
    const member = await requireMember(tx, memberId);
    if (member.role === 'owner') await keepAnOwner(tx, member.id, 'removed');
    await endSessionsOf(tx, member.id);
    await tx`update member_invitations set invited_by = null where invited_by = ${member.id}`;
    await tx`delete from members where id = ${member.id}`;
    await recordAudit(tx, { action: 'member.removed', projectId: null, target: { type: 'member', id: member.id }, changes: { email: member.email, role: member.role } });
    return member;
  });
}

/** A new member, for invitations and single sign-on. The email is normalised by the caller. */
export async function insertMember(tx: TxSql, email: string, role: Role, passwordHash: string | null) {
  try {
    const [row] = await tx<[{ id: string; email: string; role: Role }]>`
      insert into members (id, email, role, password_hash) values (${newId('member')}, ${email}, ${role}, ${passwordHash})
      returning id, email, role`;
    return row;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw new ServiceError('conflict', `${email} is already a member.`);
    throw err;
  }
}

/** The new member is the actor of their own joining: nobody is signed in yet. */
export async function recordJoined(tx: TxSql, member: { id: string; email: string; role: Role }, method: 'local' | 'sso', ip: string | null) {
  const actor: Actor = { type: 'member', id: member.id, label: member.email, ip };
  await recordAudit(tx, { action: 'member.joined', projectId: null, target: { type: 'member', id: member.id }, changes: { email: member.email, role: member.role, method }, actor });
}
