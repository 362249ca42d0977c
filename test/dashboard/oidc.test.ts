import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startFakeOidc, type Fault } from '../helpers/fake-oidc.ts';
import { createInvitation } from '../../src/members/invitations.ts';
import { loadConfig, ConfigError } from '../../src/platform/config.ts';
import { browser, memberSession, type Browser } from './client.ts';

/** §21.3: single sign-on against a fake OpenID provider, and every way its ID token can be wrong. */

const CLIENT = { clientId: 'mailroom-test', clientSecret: 'client secret: with + odd chars' };
const idp = await startFakeOidc(CLIENT);
const ctx = await createTestContext({
  env: { NODE_ENV: 'development', OIDC_ISSUER: idp.issuer, OIDC_CLIENT_ID: CLIENT.clientId, OIDC_CLIENT_SECRET: CLIENT.clientSecret, OIDC_ALLOWED_DOMAINS: 'staff.example.com, @Other.example' },
});

/** Start, the provider's authorize, then the callback, as a browser follows the redirects. */
async function ssoSignIn(b: Browser, opts: { state?: string } = {}) {
  const start = await b.get('/dashboard/oidc/start');
  assert.equal(start.res.status, 303);
  const auth = await fetch(start.res.headers.get('location')!, { redirect: 'manual' });
  assert.equal(auth.status, 302);
  const back = new URL(auth.headers.get('location')!);
  if (opts.state !== undefined) back.searchParams.set('state', opts.state);
  return b.get(back.pathname + back.search);
}

const sessionCount = async () => (await ctx.sql<[{ n: number }]>`select count(*)::int as n from dashboard_sessions`)[0].n;

test('the sign-in page offers the issuer; without the settings it does not', async () => {
  const page = await browser(ctx).get('/dashboard/login');
  // No member yet: the login page sends to sign-up. Make one.
  assert.equal(page.res.status, 303);
  await memberSession(ctx, 'owner', 'boss@example.com');
  const login = await browser(ctx).get('/dashboard/login');
  assert.match(login.text, /href="\/dashboard\/oidc\/start">Sign in with single sign-on<\/a>/);
  assert.ok(login.text.includes(`(${idp.issuer})`), 'the page names the issuer');
  const plain = await createTestContext({ env: { NODE_ENV: 'development' } });
  await memberSession(plain, 'owner');
  assert.doesNotMatch((await browser(plain).get('/dashboard/login')).text, /oidc\/start/);
  assert.equal((await browser(plain).get('/dashboard/oidc/start')).res.status, 404);
  assert.throws(() => loadConfig({ DATABASE_URL: 'postgres://x/y', SECRET_KEY: 'x'.repeat(32), OIDC_ISSUER: idp.issuer }, { requireRedis: false }), ConfigError);
});

test('a member signs in: code flow with PKCE, their own role, last sign-in and an audit entry', async () => {
  await memberSession(ctx, 'developer', 'dev@example.com');
  idp.next.user = { email: 'Dev@Example.com' };
  idp.next.fault = undefined;
  const b = browser(ctx);
  const done = await ssoSignIn(b);
  assert.equal(done.res.status, 303, done.text);
  assert.equal(done.res.headers.get('location'), '/dashboard');
  const q = idp.seen.lastAuthorize!;
  assert.equal(q.get('code_challenge_method'), 'S256');
  assert.match(q.get('scope')!, /\bopenid\b.*\bemail\b/);
  const home = await b.get('/dashboard');
  assert.match(home.text, /dev@example\.com \(developer\)/);
  const [row] = await ctx.sql<[{ lastSignInAt: Date | null }]>`select last_sign_in_at from members where email = 'dev@example.com'`;
  assert.ok(row.lastSignInAt);
  const [entry] = await ctx.sql<[{ actorLabel: string; changes: { method: string } }]>`
    select actor_label, changes from audit_log where action = 'member.signed_in' order by id desc limit 1`;
  assert.equal(entry.actorLabel, 'dev@example.com');
  assert.equal(entry.changes.method, 'sso');
});

test('an invited address joins with the invited role, and the invitation is used', async () => {
  const inv = await createInvitation(ctx.sql, { email: 'new@example.com', role: 'admin', invitedBy: null, baseUrl: 'http://x' });
  idp.next.user = { email: 'new@example.com' };
  const b = browser(ctx);
  assert.equal((await ssoSignIn(b)).res.status, 303);
  assert.match((await b.get('/dashboard')).text, /new@example\.com \(admin\)/);
  const [used] = await ctx.sql<[{ acceptedAt: Date | null }]>`select accepted_at from member_invitations where id = ${inv.id}`;
  assert.ok(used.acceptedAt);
  const [m] = await ctx.sql<[{ passwordHash: string | null }]>`select password_hash from members where email = 'new@example.com'`;
  assert.equal(m.passwordHash, null, 'no password: this member signs in with single sign-on');
});

test('OIDC_ALLOWED_DOMAINS lets others in as viewers; anyone else is refused', async () => {
  idp.next.user = { email: 'pat@staff.example.com' };
  const b = browser(ctx);
  assert.equal((await ssoSignIn(b)).res.status, 303);
  assert.match((await b.get('/dashboard')).text, /pat@staff\.example\.com \(viewer\)/);
  idp.next.user = { email: 'kim@other.example' };
  assert.equal((await ssoSignIn(browser(ctx))).res.status, 303);

  idp.next.user = { email: 'eve@elsewhere.example' };
  const before = await sessionCount();
  const refused = await ssoSignIn(browser(ctx));
  assert.equal(refused.res.status, 403);
  assert.match(refused.text, /not a member/);
  assert.equal(await sessionCount(), before);
  assert.equal((await ctx.sql`select 1 from members where email = 'eve@elsewhere.example'`).length, 0);
});

const FAULTS: [Fault, RegExp][] = [
  ['bad_audience', /aud/],
  ['expired', /expired/],
  ['wrong_nonce', /nonce/],
  ['wrong_issuer', /iss/],
  ['unverified_email', /not verified/],
  ['no_email_verified', /not verified/],
  ['unknown_key', /could not be verified/],
  ['alg_none', /could not be verified/],
];

for (const [fault, why] of FAULTS) {
  test(`an ID token that is ${fault.replace(/_/g, ' ')} signs nobody in`, async () => {
    idp.next.user = { email: 'dev@example.com' };
    idp.next.fault = fault;
    try {
      const before = await sessionCount();
      const b = browser(ctx);
      const res = await ssoSignIn(b);
      assert.equal(res.res.status, 401, `${fault}: ${res.text.slice(0, 300)}`);
      assert.match(res.text, why);
      assert.equal(await sessionCount(), before);
      assert.equal(b.jar.has('mailroom_session'), false);
    } finally {
      idp.next.fault = undefined;
    }
  });
}

test('a callback whose state is not this browser\'s, or with no pending sign-in, is refused', async () => {
  idp.next.user = { email: 'dev@example.com' };
  const before = idp.seen.tokenRequests;
  const forged = await ssoSignIn(browser(ctx), { state: 'forged' });
  assert.equal(forged.res.status, 401);
  const bare = await browser(ctx).get('/dashboard/oidc/callback?code=abc&state=def');
  assert.equal(bare.res.status, 401);
  assert.equal(idp.seen.tokenRequests, before, 'no code was exchanged');
});

test('an unreachable provider is a clear 401, not a 500', async () => {
  const down = await createTestContext({
    env: { NODE_ENV: 'development', OIDC_ISSUER: 'http://127.0.0.1:9', OIDC_CLIENT_ID: 'x', OIDC_CLIENT_SECRET: 'y' },
  });
  const res = await browser(down).get('/dashboard/oidc/start');
  assert.equal(res.res.status, 401);
  assert.match(res.text, /did not answer/);
});
