import { createHash } from 'node:crypto';
import type { createRemoteJWKSet, JWTPayload } from 'jose';
import type { Config } from '../platform/config.ts';
import { randomBase64url, safeEqual } from '../platform/crypto.ts';
import { loadOnce } from '../platform/load-once.ts';

// Loaded on the first sign-in: an installation without SSO never needs it.
const loadJose = loadOnce(() => import('jose'));

/**
 * Dashboard single sign-on (§21.3): OpenID Connect's authorization code flow with PKCE. The ID
 * token is checked with jose against the issuer's published keys: signature, iss, aud, exp, nonce,
 * and email_verified must be true. Who may then come in is the caller's (dashboard/routes/oidc.tsx).
 */

export type OidcConfig = NonNullable<Config['oidc']>;

/** Every call to the provider gives up after this; a stalled provider must not hold a sign-in open. */
export const OIDC_TIMEOUT_MS = 5000;
/** Discovery documents and token responses are small; anything larger is refused. */
const MAX_RESPONSE_BYTES = 256 * 1024;
/** Discovery is cached this long; keys are jose's to cache and refetch on an unknown kid. */
const DISCOVERY_TTL_MS = 60 * 60 * 1000;

/** Why a sign-in failed, written for the person signing in. */
export class OidcError extends Error {}

type Discovery = {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  token_endpoint_auth_methods_supported?: string[];
  id_token_signing_alg_values_supported?: string[];
};

async function getJson(url: string, init: RequestInit = {}): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(OIDC_TIMEOUT_MS) });
  } catch (err) {
    throw new OidcError(`The identity provider did not answer (${(err as Error).name === 'TimeoutError' ? 'timed out' : 'unreachable'}).`);
  }
  const length = Number(res.headers.get('content-length') ?? 0);
  if (length > MAX_RESPONSE_BYTES) throw new OidcError('The identity provider answered with too much data.');
  const text = await res.text();
  if (text.length > MAX_RESPONSE_BYTES) throw new OidcError('The identity provider answered with too much data.');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new OidcError(`The identity provider answered ${res.status} without JSON.`);
  }
  if (!res.ok) {
    const error = (body as { error?: unknown }).error;
    throw new OidcError(`The identity provider refused (${res.status}${typeof error === 'string' ? `, ${error.slice(0, 100)}` : ''}).`);
  }
  return body;
}

const discoveries = new Map<string, { at: number; doc: Discovery }>();
const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

/** The issuer's discovery document, whose `issuer` must be the configured one exactly. */
export async function discover(oidc: OidcConfig): Promise<Discovery> {
  const cached = discoveries.get(oidc.issuer);
  if (cached && Date.now() - cached.at < DISCOVERY_TTL_MS) return cached.doc;
  const doc = (await getJson(`${oidc.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`)) as Partial<Discovery>;
  if (doc.issuer !== oidc.issuer) throw new OidcError('The identity provider\'s discovery document names another issuer.');
  for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
    const value = doc[field];
    if (typeof value !== 'string' || !/^https?:\/\//.test(value)) throw new OidcError(`The identity provider's discovery document has no ${field}.`);
  }
  discoveries.set(oidc.issuer, { at: Date.now(), doc: doc as Discovery });
  return doc as Discovery;
}

async function keySet(jwksUri: string) {
  let set = keySets.get(jwksUri);
  if (!set) {
    set = (await loadJose()).createRemoteJWKSet(new URL(jwksUri), { timeoutDuration: OIDC_TIMEOUT_MS, cooldownDuration: 30_000, cacheMaxAge: 10 * 60_000 });
    keySets.set(jwksUri, set);
  }
  return set;
}

/** What the browser carries between the redirect out and the callback (sealed in a cookie). */
export type PendingSignIn = { state: string; nonce: string; verifier: string };

export async function authorizationRequest(oidc: OidcConfig, redirectUri: string): Promise<{ url: string; pending: PendingSignIn }> {
  const doc = await discover(oidc);
  const pending = { state: randomBase64url(32), nonce: randomBase64url(32), verifier: randomBase64url(48) };
  const url = new URL(doc.authorization_endpoint);
  url.searchParams.set('response_type', 'code');
  url.searchParams.set('client_id', oidc.clientId);
  url.searchParams.set('redirect_uri', redirectUri);
  url.searchParams.set('scope', 'openid email profile');
  url.searchParams.set('state', pending.state);
  url.searchParams.set('nonce', pending.nonce);
  url.searchParams.set('code_challenge', createHash('sha256').update(pending.verifier).digest('base64url'));
  url.searchParams.set('code_challenge_method', 'S256');
  return { url: url.toString(), pending };
}

export type VerifiedIdentity = { email: string; subject: string };

/**
 * The callback's code exchanged for an ID token, and that token checked. Client authentication
 * is client_secret_basic, the default, unless the provider offers only client_secret_post.
 */
export async function completeSignIn(oidc: OidcConfig, redirectUri: string, code: string, pending: PendingSignIn): Promise<VerifiedIdentity> {
  const doc = await discover(oidc);
  const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: pending.verifier });
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  const methods = doc.token_endpoint_auth_methods_supported;
  if (methods && !methods.includes('client_secret_basic') && methods.includes('client_secret_post')) {
    form.set('client_id', oidc.clientId);
    form.set('client_secret', oidc.clientSecret);
  } else {
    // RFC 6749 §2.3.1: each part form-encoded before base64.
    const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
    headers.authorization = `Basic ${Buffer.from(`${enc(oidc.clientId)}:${enc(oidc.clientSecret)}`).toString('base64')}`;
  }
  const tokens = (await getJson(doc.token_endpoint, { method: 'POST', headers, body: form.toString() })) as { id_token?: unknown };
  if (typeof tokens.id_token !== 'string') throw new OidcError('The identity provider sent no ID token.');
  return verifyIdToken(oidc, doc, tokens.id_token, pending.nonce);
}

async function verifyIdToken(oidc: OidcConfig, doc: Discovery, idToken: string, nonce: string): Promise<VerifiedIdentity> {
  const algorithms = (doc.id_token_signing_alg_values_supported ?? ['RS256']).filter((a) => a !== 'none' && !a.startsWith('HS'));
  const { jwtVerify, errors: joseErrors } = await loadJose();
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(idToken, await keySet(doc.jwks_uri), {
      issuer: oidc.issuer,
      audience: oidc.clientId,
      algorithms: algorithms.length ? algorithms : ['RS256'],
      requiredClaims: ['exp', 'iat', 'sub'],
      clockTolerance: 30,
    }));
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw new OidcError('The identity provider\'s ID token has expired.');
    if (err instanceof joseErrors.JWTClaimValidationFailed) throw new OidcError(`The ID token's ${err.claim} is not this Mailroom's.`);
    if (err instanceof joseErrors.JOSEError) throw new OidcError(`The ID token could not be verified (${err.code}).`);
    throw err;
  }
  // With several audiences, the token must have been issued to us (OIDC Core §3.1.3.7).
  if (Array.isArray(payload.aud) && payload.aud.length > 1 && payload.azp !== oidc.clientId) throw new OidcError('The ID token\'s azp is not this Mailroom\'s.');
  if (typeof payload.nonce !== 'string' || !safeEqual(payload.nonce, nonce)) throw new OidcError('The ID token\'s nonce does not match this sign-in.');
  const email = payload.email;
  if (typeof email !== 'string' || email.length > 254 || !/^[^\s@]+@[^\s@]+$/.test(email)) throw new OidcError('The identity provider sent no email address.');
  if (payload.email_verified !== true) throw new OidcError('The identity provider has not verified this email address.');
  return { email: email.trim().toLowerCase(), subject: String(payload.sub) };
}

/** Whether an address not otherwise known may come in as a viewer (OIDC_ALLOWED_DOMAINS). */
export function domainAllowed(oidc: OidcConfig, email: string): boolean {
  const domain = email.slice(email.lastIndexOf('@') + 1);
  return oidc.allowedDomains.includes(domain);
}
