import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { clientIp, isHttps } from '../src/http/client-ip.ts';
import { auditIp } from '../src/http/auth.ts';
import { recordAudit } from '../src/audit/record.ts';
import type { Role } from '../src/members/roles.ts';
import type { DashEnv, Session } from './env.ts';
import { randomBase64url, sha256 } from '../src/platform/crypto.ts';
import type { Sql } from '../src/platform/db.ts';

export const SESSION_COOKIE = 'mailroom_session';
const SESSION_DAYS = 14;


/** Only a hash of the token is stored, so a leaked table can't be replayed as cookies. */
function sessionId(token: string): string {
  return sha256(token).toString('hex');
}

/** How a member proved who they are, as the audit log's member.signed_in says. */
// 'local' is the email and password form; the audit log never names a password.
export type SignInMethod = 'local' | 'sso' | 'invitation';

async function insertSession(sql: Sql, memberId: string, method: SignInMethod, ip: string | null) {
  const token = randomBase64url(32);
  await sql.begin(async (tx) => {
    await tx`
      insert into dashboard_sessions (id, member_id, csrf_secret, expires_at)
      values (${sessionId(token)}, ${memberId}, ${randomBase64url(32)}, now() + ${`${SESSION_DAYS} days`}::interval)`;
    const [m] = await tx<[{ email: string; role: Role }]>`update members set last_sign_in_at = now() where id = ${memberId} returning email, role`;
    await recordAudit(tx, {
      action: 'member.signed_in', projectId: null, target: { type: 'member', id: memberId }, changes: { method },
      actor: { type: 'member', id: memberId, label: m.email, ip },
    });
  });
  // A team's expired rows are few; sweeping them at sign-in keeps the table small.
  await sql`delete from dashboard_sessions where expires_at < now()`;
  return token;
}

export async function findSession(sql: Sql, token: string): Promise<Session | undefined> {
  const [row] = await sql<[Session?]>`
    select s.id, s.member_id, m.email, m.role, s.csrf_secret
    from dashboard_sessions s join members m on m.id = s.member_id
    where s.id = ${sessionId(token)} and s.expires_at > now()`;
  return row;
}

/** Whether a session (by its stored id) still stands: not ended, not expired, its member still one. */
export async function sessionStands(sql: Sql, id: string): Promise<boolean> {
  const [row] = await sql`
    select 1 from dashboard_sessions s join members m on m.id = s.member_id where s.id = ${id} and s.expires_at > now()`;
  return row !== undefined;
}

/** HttpOnly, SameSite=Lax, and Secure whenever the request came over https (directly or via a trusted proxy). */
export function cookieOptions(c: Context<DashEnv>, maxAge: number) {
  return { httpOnly: true, sameSite: 'Lax' as const, path: '/', secure: isHttps(c, c.var.deps.config.trustProxy), maxAge };
}

export async function startSession(c: Context<DashEnv>, memberId: string, method: SignInMethod) {
  const token = await insertSession(c.var.deps.sql, memberId, method, auditIp(clientIp(c, c.var.deps.config.trustProxy)));
  setCookie(c, SESSION_COOKIE, token, cookieOptions(c, SESSION_DAYS * 86_400));
}

export async function currentSession(c: Context<DashEnv>): Promise<Session | undefined> {
  const token = getCookie(c, SESSION_COOKIE);
  if (!token || token.length > 100) return undefined;
  return findSession(c.var.deps.sql, token);
}

/** Every session of one member: a changed role or a removal applies from their next request. */
export async function endMemberSessions(sql: Sql, memberId: string) {
  await sql`delete from dashboard_sessions where member_id = ${memberId}`;
}

export async function endSession(c: Context<DashEnv>, session: Session) {
  await c.var.deps.sql`delete from dashboard_sessions where id = ${session.id}`;
  deleteCookie(c, SESSION_COOKIE, cookieOptions(c, 0));
}
