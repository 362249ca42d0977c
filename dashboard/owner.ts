import type { Sql, TxSql } from '../src/platform/db.ts';
import { newId } from '../src/platform/ids.ts';
import { recordJoined } from '../src/members/service.ts';
import type { Member } from './env.ts';
import { dummyHash, hashPassword, needsRehash, verifyPassword } from './password.ts';

/**
 * The instance's first member. The first registration claims the instance as its owner; everyone
 * after joins by invitation (src/members/) or single sign-on.
 */

export type Owner = { id: string; email: string };

export const MIN_PASSWORD_LENGTH = 12;
/** RFC 5321's longest usable address; the sign-in and sign-up forms take no more. */
export const MAX_EMAIL_LENGTH = 254;

export class SignupError extends Error {}

/** Whether the instance has been claimed: sign-up is open only until then. */
export async function ownerExists(sql: Sql | TxSql): Promise<boolean> {
  const [row] = await sql`select 1 from members limit 1`;
  return row !== undefined;
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** The address, normalised, or a SignupError saying what is wrong with it. */
export function checkEmail(emailInput: string): string {
  const email = normaliseEmail(emailInput);
  if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > MAX_EMAIL_LENGTH) throw new SignupError(`Enter a valid email address of at most ${MAX_EMAIL_LENGTH} characters.`);
  return email;
}

export function checkPassword(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH) throw new SignupError(`The password must be at least ${MIN_PASSWORD_LENGTH} characters.`);
  if (password.length > 1024) throw new SignupError('The password must be at most 1024 characters.');
}

const TAKEN = 'This instance already has an owner; sign in instead.';

export async function registerOwner(sql: Sql, emailInput: string, password: string): Promise<Owner> {
  const email = checkEmail(emailInput);
  checkPassword(password);
  if (await ownerExists(sql)) throw new SignupError(TAKEN);
  const passwordHash = await hashPassword(password);
  return sql.begin(async (tx) => {
    // Two simultaneous sign-ups: the lock makes the second see the first's row and stop.
    await tx`select pg_advisory_xact_lock(hashtext('mailroom:first-member'))`;
    if (await ownerExists(tx)) throw new SignupError(TAKEN);
    const [owner] = await tx<Owner[]>`
      insert into members (id, email, role, password_hash) values (${newId('member')}, ${email}, 'owner', ${passwordHash})
      returning id, email`;
    await recordJoined(tx, { ...owner!, role: 'owner' }, 'local', null);
    return owner!;
  });
}

/** The member when email and password match; undefined otherwise, in about the same time. */
export async function authenticateMember(sql: Sql, emailInput: string, password: string): Promise<Member | undefined> {
  const [row] = await sql<[(Member & { passwordHash: string | null })?]>`
    select id, email, role, password_hash from members where email = ${normaliseEmail(emailInput)}`;
  // A member who only signs in with single sign-on has no password, and no password matches.
  const ok = await verifyPassword(password, row?.passwordHash ?? (await dummyHash()));
  if (!row || !row.passwordHash || !ok) return undefined;
  if (needsRehash(row.passwordHash)) {
    await sql`update members set password_hash = ${await hashPassword(password)} where id = ${row.id}`;
  }
  return { id: row.id, email: row.email, role: row.role };
}
