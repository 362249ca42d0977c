import type { Sql } from '../src/platform/db.ts';
import { newId } from '../src/platform/ids.ts';
import { dummyHash, hashPassword, needsRehash, verifyPassword } from './password.ts';

/**
 * The instance's single owner account. The first registration claims the instance; the
 * `owner_accounts_singleton` index refuses any second row, even from a simultaneous signup.
 */

export type Owner = { id: string; email: string };

export const MIN_PASSWORD_LENGTH = 12;
/** RFC 5321's longest usable address; the sign-in and sign-up forms take no more. */
export const MAX_EMAIL_LENGTH = 254;

export class SignupError extends Error {}

export async function ownerExists(sql: Sql): Promise<boolean> {
  const [row] = await sql`select 1 from owner_accounts limit 1`;
  return row !== undefined;
}

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

export async function registerOwner(sql: Sql, emailInput: string, password: string): Promise<Owner> {
  const email = normaliseEmail(emailInput);
  if (!/^[^\s@]+@[^\s@]+$/.test(email) || email.length > MAX_EMAIL_LENGTH) throw new SignupError(`Enter a valid email address of at most ${MAX_EMAIL_LENGTH} characters.`);
  if (password.length < MIN_PASSWORD_LENGTH) throw new SignupError(`The password must be at least ${MIN_PASSWORD_LENGTH} characters.`);
  if (password.length > 1024) throw new SignupError('The password must be at most 1024 characters.');
  if (await ownerExists(sql)) throw new SignupError('This instance already has an owner; sign in instead.');
  const passwordHash = await hashPassword(password);
  try {
    const [owner] = await sql<Owner[]>`
      insert into owner_accounts (id, email, password_hash) values (${newId('owner')}, ${email}, ${passwordHash})
      returning id, email`;
    return owner!;
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw new SignupError('This instance already has an owner; sign in instead.');
    throw err;
  }
}

/** The owner when email and password match; undefined otherwise, in about the same time. */
export async function authenticateOwner(sql: Sql, emailInput: string, password: string): Promise<Owner | undefined> {
  const [row] = await sql<[{ id: string; email: string; passwordHash: string }?]>`
    select id, email, password_hash from owner_accounts where email = ${normaliseEmail(emailInput)}`;
  const ok = await verifyPassword(password, row?.passwordHash ?? (await dummyHash()));
  if (!row || !ok) return undefined;
  if (needsRehash(row.passwordHash)) {
    await sql`update owner_accounts set password_hash = ${await hashPassword(password)} where id = ${row.id}`;
  }
  return { id: row.id, email: row.email };
}
