import { createServer, type IncomingMessage } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { listenOnLoopback } from './listen.ts';

/**
 * A small OpenID provider on loopback: discovery, JWKS, authorize and token, as Google, Okta or
 * Keycloak serve them. It insists on what a real one does (the client's secret, the redirect URI
 * and the PKCE verifier) and can be told to misbehave: an ID token for another audience, expired,
 * with another nonce or issuer, an unverified email, or signed by a key it never published.
 */

export type Fault = 'bad_audience' | 'expired' | 'wrong_nonce' | 'wrong_issuer' | 'unverified_email' | 'unknown_key' | 'no_email_verified' | 'alg_none';

export type FakeUser = { email: string; emailVerified?: boolean; sub?: string };

type Grant = { clientId: string; redirectUri: string; nonce: string; challenge: string; user: FakeUser; fault?: Fault };

export async function startFakeOidc(opts: { clientId: string; clientSecret: string; authMethods?: string[] }) {
  const { privateKey, publicKey } = await generateKeyPair('RS256');
  const stray = await generateKeyPair('RS256');
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  const grants = new Map<string, Grant>();
  /** Who the next /authorize signs in, and what goes wrong with their token. */
  const next: { user: FakeUser; fault?: Fault } = { user: { email: 'someone@example.com' } };
  const seen = { tokenRequests: 0, authorizeRequests: 0, lastAuthorize: undefined as URLSearchParams | undefined };
  let issuer = '';

  async function idToken(grant: Grant, key: CryptoKey, kid: string) {
    const f = grant.fault;
    const claims: Record<string, unknown> = {
      email: grant.user.email,
      nonce: f === 'wrong_nonce' ? 'not-the-nonce' : grant.nonce,
      name: 'Fake User',
    };
    if (f !== 'no_email_verified') claims.email_verified = f === 'unverified_email' ? false : grant.user.emailVerified ?? true;
    const now = Math.floor(Date.now() / 1000);
    if (f === 'alg_none') {
      const enc = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
      return `${enc({ alg: 'none' })}.${enc({ ...claims, iss: issuer, aud: grant.clientId, sub: grant.user.sub ?? 'sub-1', iat: now, exp: now + 300 })}.`;
    }
    return new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid })
      .setIssuer(f === 'wrong_issuer' ? 'https://evil.example' : issuer)
      .setAudience(f === 'bad_audience' ? 'someone-else' : grant.clientId)
      .setSubject(grant.user.sub ?? `sub-${grant.user.email}`)
      .setIssuedAt(f === 'expired' ? now - 7200 : now)
      .setExpirationTime(f === 'expired' ? now - 3600 : now + 300)
      .sign(key);
  }

  const body = (req: IncomingMessage) => new Promise<string>((resolve) => {
    let s = '';
    req.on('data', (d) => { s += d; });
    req.on('end', () => resolve(s));
  });

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', issuer);
    const json = (status: number, value: unknown) => { res.writeHead(status, { 'content-type': 'application/json' }); res.end(JSON.stringify(value)); };
    if (url.pathname === '/.well-known/openid-configuration') {
      return json(200, {
        issuer,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: opts.authMethods ?? ['client_secret_basic', 'client_secret_post'],
        code_challenge_methods_supported: ['S256'],
      });
    }
    if (url.pathname === '/jwks') return json(200, { keys: [jwk] });
    if (url.pathname === '/authorize') {
      seen.authorizeRequests++;
      const q = url.searchParams;
      seen.lastAuthorize = q;
      if (q.get('client_id') !== opts.clientId || q.get('response_type') !== 'code' || q.get('code_challenge_method') !== 'S256' || !q.get('code_challenge') || !q.get('nonce')) {
        return json(400, { error: 'invalid_request' });
      }
      const code = randomBytes(16).toString('hex');
      grants.set(code, { clientId: opts.clientId, redirectUri: q.get('redirect_uri')!, nonce: q.get('nonce')!, challenge: q.get('code_challenge')!, ...next });
      const back = new URL(q.get('redirect_uri')!);
      back.searchParams.set('code', code);
      back.searchParams.set('state', q.get('state') ?? '');
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      seen.tokenRequests++;
      const form = new URLSearchParams(await body(req));
      let id = form.get('client_id');
      let secret = form.get('client_secret');
      const auth = req.headers.authorization;
      if (auth?.startsWith('Basic ')) {
        const [u, p] = Buffer.from(auth.slice(6), 'base64').toString().split(':');
        id = decodeURIComponent(u!.replace(/\+/g, ' '));
        secret = decodeURIComponent(p!.replace(/\+/g, ' '));
      }
      if (id !== opts.clientId || secret !== opts.clientSecret) return json(401, { error: 'invalid_client' });
      const grant = grants.get(form.get('code') ?? '');
      grants.delete(form.get('code') ?? '');
      if (!grant || form.get('grant_type') !== 'authorization_code' || form.get('redirect_uri') !== grant.redirectUri) return json(400, { error: 'invalid_grant' });
      const verifier = form.get('code_verifier') ?? '';
      if (createHash('sha256').update(verifier).digest('base64url') !== grant.challenge) return json(400, { error: 'invalid_grant', error_description: 'PKCE' });
      const token = grant.fault === 'unknown_key' ? await idToken(grant, stray.privateKey, 'k1') : await idToken(grant, privateKey, 'k1');
      return json(200, { access_token: 'at', token_type: 'Bearer', expires_in: 300, id_token: token });
    }
    json(404, { error: 'not_found' });
  });
  const { url } = await listenOnLoopback(server);
  issuer = url;
  return { issuer, next, seen };
}
