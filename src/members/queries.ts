import type { Sql, TxSql } from '../platform/db.ts';
import type { Role } from './roles.ts';

export type MemberRow = { id: string; email: string; role: Role; createdAt: Date; lastSignInAt: Date | null; hasPassword: boolean };
export type InvitationRow = { id: string; email: string; role: Role; invitedBy: string | null; invitedByEmail: string | null; createdAt: Date; expiresAt: Date };

/** Members are the instance's, not a project's: a team shares every project. */
export async function listMembers(sql: Sql) {
  return sql<MemberRow[]>`
    select id, email, role, created_at, last_sign_in_at, password_hash is not null as has_password
    from members order by created_at, id`;
}

/** Invitations not yet used and not expired, newest first. */
export async function listOpenInvitations(sql: Sql) {
  return sql<InvitationRow[]>`
    select i.id, i.email, i.role, i.invited_by, m.email as invited_by_email, i.created_at, i.expires_at
    from member_invitations i left join members m on m.id = i.invited_by
    where i.accepted_at is null and i.expires_at > now()
    order by i.id desc`;
}

export async function getMember(sql: Sql | TxSql, id: string) {
  const [row] = await sql<[{ id: string; email: string; role: Role }?]>`select id, email, role from members where id = ${id}`;
  return row;
}

export async function getMemberByEmail(sql: Sql | TxSql, email: string) {
  const [row] = await sql<[{ id: string; email: string; role: Role }?]>`select id, email, role from members where email = ${email}`;
  return row;
}

/** The owners, locked, so two demotions at once cannot both leave the other as the last. */
export async function lockOwners(tx: TxSql) {
  return tx<{ id: string }[]>`select id from members where role = 'owner' order by id for update`;
}
