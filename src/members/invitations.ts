import type { Sql, TxSql } from '../platform/db.ts';
import { randomBase64url, sha256 } from '../platform/crypto.ts';
import { ServiceError } from '../platform/errors.ts';
import { newId } from '../platform/ids.ts';
import { checkEmail, checkPassword, SignupError } from '../../dashboard/owner.ts';
import { hashPassword } from '../../dashboard/password.ts';
import { getMemberByEmail } from './queries.ts';
import { insertMember, recordJoined } from './service.ts';
import { isRole, ROLES, type Role } from './roles.ts';
import { recordAudit } from '../audit/record.ts';

/** An invitation link works once, for this long. */
export const INVITATION_DAYS = 7;
/** The path a link opens, under the instance's base URL. */
export const JOIN_PATH = '/dashboard/join/';

export type Invitation = { id: string; email: string; role: Role; invite_url: string; expires_at: string };

/** The link's token is shown once, in invite_url; only its SHA-256 is stored. */
function tokenHash(token: string): Buffer {
  return sha256(token);
}

/** Replacing or withdrawing an invitation the actor may not handle (an owner's, for an admin). */
export class InvitationRefused extends ServiceError {
  constructor(readonly role: Role) {
    super('invalid_input', `Only an owner may withdraw or replace an invitation as ${role}.`);
  }
}

/**
 * Invites `email` as `role`. A second invitation to the same address replaces the first, whose
 * link stops working (`member.invitation_withdrawn`, in the same transaction). `baseUrl` is the
 * instance's public origin, e.g. https://mail.example.com. `handles` are the roles whose open
 * invitations the inviter may replace (all, for the CLI); another's is refused, InvitationRefused.
 */
export async function createInvitation(sql: Sql, input: { email: string; role: string; invitedBy: string | null; baseUrl: string; handles?: readonly Role[] }): Promise<Invitation> {
  let email: string;
  try {
    email = checkEmail(input.email);
  } catch (err) {
    if (err instanceof SignupError) throw new ServiceError('invalid_input', err.message);
    throw err;
  }
  if (!isRole(input.role)) throw new ServiceError('invalid_input', `The role must be one of ${ROLES.join(', ')}.`);
  const token = randomBase64url(32);
  const id = newId('invitation');
  const row = await sql.begin(async (tx) => {
    if (await getMemberByEmail(tx, email)) throw new ServiceError('conflict', `${email} is already a member.`);
    const open = await tx<{ id: string; role: Role }[]>`
      select id, role from member_invitations where email = ${email} and accepted_at is null order by id for update`;
    const refused = open.find((o) => input.handles && !input.handles.includes(o.role));
    if (refused) throw new InvitationRefused(refused.role);
    for (const old of open) {
      await tx`delete from member_invitations where id = ${old.id}`;
      await recordAudit(tx, { action: 'member.invitation_withdrawn', projectId: null, target: { type: 'member', id: old.id }, changes: { email, role: old.role, replaced: true } });
    }
    const [inserted] = await tx<[{ expiresAt: Date }]>`
      insert into member_invitations (id, email, role, token_hash, invited_by, expires_at)
      values (${id}, ${email}, ${input.role}, ${tokenHash(token)}, ${input.invitedBy}, now() + ${`${INVITATION_DAYS} days`}::interval)
      returning expires_at`;
    await recordAudit(tx, { action: 'member.invited', projectId: null, target: { type: 'member', id }, changes: { email, role: input.role } });
    return inserted;
  });
  return { id, email, role: input.role, invite_url: `${input.baseUrl.replace(/\/+$/, '')}${JOIN_PATH}${token}`, expires_at: row.expiresAt.toISOString() };
}

export type OpenInvitation = { id: string; email: string; role: Role; expiresAt: Date };

/** The open invitation a link's token names, or undefined when it is unknown, used or expired. */
export async function findInvitation(sql: Sql | TxSql, token: string, lock = false): Promise<OpenInvitation | undefined> {
  if (!/^[\w-]{43}$/.test(token)) return undefined;
  const [row] = await sql<[OpenInvitation?]>`
    select id, email, role, expires_at from member_invitations
    where token_hash = ${tokenHash(token)} and accepted_at is null and expires_at > now()
    ${lock ? sql`for update` : sql``}`;
  return row;
}

/** Marks an open invitation used by the member it made; inside the transaction that made them. */
export async function markAccepted(tx: TxSql, invitationId: string, memberId: string) {
  await tx`update member_invitations set accepted_at = now(), accepted_by = ${memberId} where id = ${invitationId}`;
}

/** Following the link: the invitee sets a password and becomes a member. The link then stops working. */
export async function acceptInvitation(sql: Sql, token: string, password: string, ip: string | null = null) {
  try {
    checkPassword(password);
  } catch (err) {
    if (err instanceof SignupError) throw new ServiceError('invalid_input', err.message);
    throw err;
  }
  // The link is checked before the password is hashed (128 MiB and a pool thread each), so a
  // stranger's unknown or spent token costs one indexed read. It is checked again, locked, below.
  const gone = () => new ServiceError('not_found', 'This invitation link was used already, has expired, or was withdrawn.');
  if (!(await findInvitation(sql, token))) throw gone();
  const passwordHash = await hashPassword(password);
  return sql.begin(async (tx) => {
    const invitation = await findInvitation(tx, token, true);
    if (!invitation) throw gone();
    const member = await insertMember(tx, invitation.email, invitation.role, passwordHash);
    await markAccepted(tx, invitation.id, member.id);
    await recordJoined(tx, member, 'local', ip);
    return { member, invitation };
  });
}

/** The open invitation to `email`, for single sign-on, which proves the address instead of a link. */
export async function openInvitationFor(tx: TxSql, email: string): Promise<OpenInvitation | undefined> {
  const [row] = await tx<[OpenInvitation?]>`
    select id, email, role, expires_at from member_invitations
    where email = ${email} and accepted_at is null and expires_at > now() for update`;
  return row;
}

/**
 * Withdraws an open invitation: its link stops working, and `member.invitation_withdrawn` commits
 * with it. `handles` are the roles the actor may withdraw (all, when not given); another's is
 * refused with InvitationRefused, checked on the locked row.
 */
export async function withdrawInvitation(sql: Sql, invitationId: string, handles?: readonly Role[]) {
  return sql.begin(async (tx) => {
    const [row] = await tx<[{ id: string; email: string; role: Role }?]>`
      select id, email, role from member_invitations where id = ${invitationId} and accepted_at is null for update`;
    if (!row) throw new ServiceError('not_found', 'There is no such open invitation.');
    if (handles && !handles.includes(row.role)) throw new InvitationRefused(row.role);
    await tx`delete from member_invitations where id = ${row.id}`;
    await recordAudit(tx, { action: 'member.invitation_withdrawn', projectId: null, target: { type: 'member', id: row.id }, changes: { email: row.email, role: row.role } });
    return row;
  });
}

export async function getOpenInvitation(sql: Sql, invitationId: string) {
  const [row] = await sql<[{ id: string; email: string; role: Role }?]>`
    select id, email, role from member_invitations where id = ${invitationId} and accepted_at is null`;
  return row;
}
