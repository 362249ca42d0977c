import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { authorizationRequest, completeSignIn, domainAllowed, OidcError, type OidcConfig, type PendingSignIn } from '../../src/members/oidc.ts';
import { markAccepted, openInvitationFor } from '../../src/members/invitations.ts';
import { getMemberByEmail } from '../../src/members/queries.ts';
import { insertMember, recordJoined } from '../../src/members/service.ts';
import { decrypt, deriveKey, encrypt, safeEqual } from '../../src/platform/crypto.ts';
import { auditIp } from '../../src/http/auth.ts';
import { clientIp } from '../../src/http/client-ip.ts';
import { expectedOrigin } from '../csrf.ts';
import { BASE, type DashEnv } from '../env.ts';
import { errorPage } from '../render.tsx';
import { cookieOptions, startSession } from '../session.ts';

/**
 * Single sign-on. /oidc/start sends the browser to the issuer with a fresh state, nonce and PKCE
 * verifier, sealed (AES-GCM under SECRET_KEY) in a short-lived cookie; /oidc/callback checks the
 * state, exchanges the code and lets in a member, an invitee, or an allowed domain's viewer.
 */

const PENDING_COOKIE = 'mailroom_oidc';
const PENDING_SECONDS = 600;

function redirectUri(c: Context<DashEnv>) {
  return `${c.var.deps.config.publicBaseUrl ?? expectedOrigin(c)}${BASE}/oidc/callback`;
}

function seal(c: Context<DashEnv>, pending: PendingSignIn): string {
  const body = JSON.stringify({ ...pending, exp: Date.now() + PENDING_SECONDS * 1000 });
  return encrypt(deriveKey(c.var.deps.config.secretKey, 'oidc-state'), body).toString('base64url');
}

function unseal(c: Context<DashEnv>, value: string | undefined): PendingSignIn | undefined {
  if (!value || value.length > 2000) return undefined;
  try {
    const p = JSON.parse(decrypt(deriveKey(c.var.deps.config.secretKey, 'oidc-state'), Buffer.from(value, 'base64url'))) as PendingSignIn & { exp: number };
    return p.exp > Date.now() ? p : undefined;
  } catch {
    return undefined;
  }
}

const failed = (c: Context<DashEnv>, why: string) => errorPage(c, 401, 'Single sign-on failed', `${why} Try again, or sign in with your email and password.`);

/** The member this verified address is, or becomes: a member, an invitee, or an allowed domain's viewer. */
async function admit(c: Context<DashEnv>, oidc: OidcConfig, email: string) {
  const { sql } = c.var.deps;
  const ip = auditIp(clientIp(c, c.var.deps.config.trustProxy));
  return sql.begin(async (tx) => {
    const member = await getMemberByEmail(tx, email);
    if (member) return member;
    const invitation = await openInvitationFor(tx, email);
    const role = invitation?.role ?? (domainAllowed(oidc, email) ? 'viewer' : undefined);
    if (!role) return undefined;
    const created = await insertMember(tx, email, role, null);
    if (invitation) await markAccepted(tx, invitation.id, created.id);
    await recordJoined(tx, created, 'sso', ip);
    return created;
  });
}

export function registerOidcRoutes(app: Hono<DashEnv>) {
  app.get('/oidc/start', async (c) => {
    const oidc = c.var.deps.config.oidc;
    if (!oidc) return errorPage(c, 404, 'Not found', 'Single sign-on is not set up on this Mailroom.');
    try {
      const { url, pending } = await authorizationRequest(oidc, redirectUri(c));
      setCookie(c, PENDING_COOKIE, seal(c, pending), { ...cookieOptions(c, PENDING_SECONDS), path: `${BASE}/oidc` });
      return c.redirect(url, 303);
    } catch (err) {
      if (err instanceof OidcError) return failed(c, err.message);
      throw err;
    }
  });

  app.get('/oidc/callback', async (c) => {
    const oidc = c.var.deps.config.oidc;
    if (!oidc) return errorPage(c, 404, 'Not found', 'Single sign-on is not set up on this Mailroom.');
    const pending = unseal(c, getCookie(c, PENDING_COOKIE));
    // One attempt per redirect: the state, nonce and verifier are spent whatever happens next.
    deleteCookie(c, PENDING_COOKIE, { ...cookieOptions(c, 0), path: `${BASE}/oidc` });
    const state = c.req.query('state') ?? '';
    if (!pending || !state || !safeEqual(state, pending.state)) return failed(c, 'The sign-in expired or did not start here.');
    const error = c.req.query('error');
    if (error) return failed(c, `The identity provider said: ${error.slice(0, 100)}.`);
    const code = c.req.query('code');
    if (!code || code.length > 4096) return failed(c, 'The identity provider sent no code.');
    try {
      const identity = await completeSignIn(oidc, redirectUri(c), code, pending);
      const member = await admit(c, oidc, identity.email);
      if (!member) {
        return errorPage(c, 403, 'Not a member',
          `${identity.email} is not a member of this Mailroom and has no invitation. Ask an owner or admin to invite you.`);
      }
      await startSession(c, member.id, 'sso');
      return c.redirect(BASE, 303);
    } catch (err) {
      if (err instanceof OidcError) return failed(c, err.message);
      throw err;
    }
  });
}
