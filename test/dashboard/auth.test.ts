import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browser, OWNER, signIn } from './client.ts';
import { randomBytes, scryptSync } from 'node:crypto';
import { authenticateMember } from '../../dashboard/owner.ts';
import { sha256 } from '../../src/platform/crypto.ts';

const ctx = await createTestContext();

test('before anyone signs up, pages send the visitor to signup; / goes to the dashboard', async () => {
  const root = await ctx.app.request('/');
  assert.equal(root.status, 302);
  assert.equal(root.headers.get('location'), '/dashboard');
  const b = browser(ctx);
  const { res } = await b.get('/dashboard');
  assert.equal(res.status, 303);
  assert.equal(res.headers.get('location'), '/dashboard/login');
  const login = await b.get('/dashboard/login');
  assert.equal(login.res.headers.get('location'), '/dashboard/signup');
});

test('concurrent first signups: exactly one owner wins, the others are refused', async () => {
  const clients = await Promise.all([0, 1, 2, 3].map(async () => {
    const b = browser(ctx);
    await b.get('/dashboard/signup');
    return b;
  }));
  const results = await Promise.all(clients.map((b, i) =>
    b.post('/dashboard/signup', { email: i === 0 ? OWNER.email : `rival${i}@example.com`, password: OWNER.password })));
  const winners = results.filter((r) => r.res.status === 303);
  assert.equal(winners.length, 1, `statuses ${results.map((r) => r.res.status)}`);
  for (const r of results.filter((x) => x.res.status !== 303)) {
    assert.equal(r.res.status, 409);
    assert.match(r.text, /already has an owner/);
  }
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from members`;
  assert.equal(n, 1);
  // Whoever won, make the known owner the one the rest of the file signs in as.
  await ctx.sql`update members set email = ${OWNER.email}`;
});

test('signup is closed after the first owner: the page redirects and a POST is refused', async () => {
  const b = browser(ctx);
  const page = await b.get('/dashboard/signup');
  assert.equal(page.res.status, 303);
  assert.equal(page.res.headers.get('location'), '/dashboard/login');
  await b.get('/dashboard/login');
  const late = await b.post('/dashboard/signup', { email: 'late@example.com', password: 'another long password' });
  assert.equal(late.res.status, 409);
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from members`;
  assert.equal(n, 1);
});

test('the password is stored as salted scrypt, never in clear', async () => {
  const [row] = await ctx.sql<[{ passwordHash: string }]>`select password_hash from members`;
  assert.match(row.passwordHash, /^scrypt\$131072\$8\$1\$[\w-]{22}\$[\w-]{86}$/);
  assert.ok(!row.passwordHash.includes(OWNER.password));
});

test('a hash made with older, weaker parameters still signs in, and is raised to today\'s at that sign-in', async () => {
  const salt = randomBytes(16);
  const key = scryptSync(OWNER.password.normalize('NFC'), salt, 64, { N: 16384, r: 8, p: 1 });
  const old = ['scrypt', 16384, 8, 1, salt.toString('base64url'), key.toString('base64url')].join('$');
  await ctx.sql`update members set password_hash = ${old}`;
  assert.ok(await authenticateMember(ctx.sql, OWNER.email, OWNER.password));
  const [row] = await ctx.sql<[{ passwordHash: string }]>`select password_hash from members`;
  assert.match(row.passwordHash, /^scrypt\$131072\$8\$1\$/);
  assert.ok(await authenticateMember(ctx.sql, OWNER.email, OWNER.password), 'the new hash verifies');
  assert.equal(await authenticateMember(ctx.sql, OWNER.email, 'wrong password'), undefined);
});

test('sign in: wrong password is a 401 page; the right one gives a hashed session and the cookie flags', async () => {
  const b = browser(ctx);
  await b.get('/dashboard/login');
  const wrong = await b.post('/dashboard/login', { email: OWNER.email, password: 'not the password' });
  assert.equal(wrong.res.status, 401);
  assert.match(wrong.text, /Wrong email or password/);
  assert.equal(b.jar.get('mailroom_session'), undefined);

  const ok = await b.post('/dashboard/login', { email: OWNER.email.toUpperCase(), password: OWNER.password });
  assert.equal(ok.res.status, 303);
  const cookie = ok.res.headers.getSetCookie().find((c) => c.startsWith('mailroom_session='))!;
  assert.match(cookie, /HttpOnly/);
  assert.match(cookie, /SameSite=Lax/);
  assert.match(cookie, /Path=\//);
  assert.doesNotMatch(cookie, /Secure/, 'plain http without a trusted proxy');
  const token = b.jar.get('mailroom_session')!;
  const rows = await ctx.sql<{ id: string; expiresAt: Date }[]>`select id, expires_at from dashboard_sessions`;
  assert.ok(rows.some((r) => r.id === sha256(token).toString('hex')), 'only the SHA-256 of the token is stored');
  assert.ok(!rows.some((r) => r.id === token));
  const days = (rows.at(-1)!.expiresAt.getTime() - Date.now()) / 86_400_000;
  assert.ok(days > 13.9 && days <= 14);

  const home = await b.get('/dashboard');
  assert.equal(home.res.status, 200);
  assert.match(home.text, /Projects/);

  const out = await b.post('/dashboard/logout');
  assert.equal(out.res.status, 303);
  const [gone] = await ctx.sql`select 1 from dashboard_sessions where id = ${sha256(token).toString('hex')}`;
  assert.equal(gone, undefined, 'logout deletes the session');
  const after = await ctx.app.request('/dashboard', { headers: { cookie: `mailroom_session=${token}` } });
  assert.equal(after.status, 303, 'the old cookie no longer works');
});

test('sign-in is throttled per client address, and per address and email; never per email alone', async () => {
  const c4 = await createTestContext({ env: { TRUST_PROXY: 'true' } });
  await signIn(browser(c4));
  // Wrong passwords for the owner's email from other addresses: past the ten a minute that once
  // locked the email everywhere.
  for (let i = 0; i < 11; i++) {
    const attacker = browser(c4, { 'x-forwarded-for': `203.0.113.${i % 4}` });
    await attacker.get('/dashboard/login');
    const r = await attacker.post('/dashboard/login', { email: OWNER.email, password: 'wrong password ' + i });
    assert.ok(r.res.status === 401 || r.res.status === 429, String(r.res.status));
  }
  const owner = browser(c4, { 'x-forwarded-for': '198.51.100.7' });
  await owner.get('/dashboard/login');
  const ok = await owner.post('/dashboard/login', OWNER);
  assert.equal(ok.res.status, 303, 'the owner still signs in from their own address');

  // One address: five tries for one email, then that pair waits; ten in all, then the address waits.
  const fromA = browser(c4, { 'x-forwarded-for': '192.0.2.1' });
  await fromA.get('/dashboard/login');
  for (let i = 0; i < 5; i++) assert.equal((await fromA.post('/dashboard/login', { email: OWNER.email, password: 'wrong ' + i })).res.status, 401);
  const blocked = await fromA.post('/dashboard/login', OWNER);
  assert.equal(blocked.res.status, 429, 'the pair is throttled even with the right password');
  assert.ok(Number(blocked.res.headers.get('retry-after')) > 0);
  assert.match(blocked.text, /Too many sign-in attempts/);
  assert.equal(fromA.jar.get('mailroom_session'), undefined);
  for (let i = 0; i < 4; i++) assert.equal((await fromA.post('/dashboard/login', { email: `other${i}@example.com`, password: 'x'.repeat(12) })).res.status, 401);
  const other = await fromA.post('/dashboard/login', { email: 'someone@example.com', password: 'x'.repeat(12) });
  assert.equal(other.res.status, 429, 'the address is throttled for any email');
});

test('the Secure flag follows https from a trusted proxy only', async () => {
  for (const [env, secure] of [[{ TRUST_PROXY: 'true' }, true], [{}, false]] as const) {
    const c2 = await createTestContext({ env });
    const b = browser(c2, { 'x-forwarded-proto': 'https' });
    await signIn(b);
    const b2 = browser(c2, { 'x-forwarded-proto': 'https' });
    await b2.get('/dashboard/login');
    const { res } = await b2.post('/dashboard/login', OWNER);
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('mailroom_session='))!;
    assert.equal(/;\s*Secure/.test(cookie), secure, `${JSON.stringify(env)}: ${cookie}`);
    assert.match(cookie, /HttpOnly/);
  }
});

test('signup rejects a short password and a bad email with the form again', async () => {
  const c3 = await createTestContext();
  const b = browser(c3);
  await b.get('/dashboard/signup');
  const short = await b.post('/dashboard/signup', { email: 'a@example.com', password: 'short' });
  assert.equal(short.res.status, 422);
  assert.match(short.text, /at least 12 characters/);
  const bad = await b.post('/dashboard/signup', { email: 'not-an-email', password: OWNER.password });
  assert.equal(bad.res.status, 422);
  const [{ n }] = await c3.sql<[{ n: number }]>`select count(*)::int as n from members`;
  assert.equal(n, 0);
});

test('failed sign-ins from IPv6 count per /64: new addresses in one /64 share its budget', async () => {
  const c6 = await createTestContext({ env: { TRUST_PROXY: 'true' } });
  await signIn(browser(c6));
  // Ten wrong passwords, each from a different address of one /64, each for another email: the
  // per-pair limit never bites, only the per-source one can.
  for (let i = 0; i < 10; i++) {
    const b = browser(c6, { 'x-forwarded-for': `2001:db8:5:6::${(i + 1).toString(16)}` });
    await b.get('/dashboard/login');
    assert.equal((await b.post('/dashboard/login', { email: `guess${i}@example.com`, password: 'x'.repeat(12) })).res.status, 401);
  }
  const fresh = browser(c6, { 'x-forwarded-for': '2001:db8:5:6:ffff:1:2:3' });
  await fresh.get('/dashboard/login');
  const blocked = await fresh.post('/dashboard/login', OWNER);
  assert.equal(blocked.res.status, 429, 'a new address of the same /64 is over the limit');
  // The next /64 over is another network, with its own budget.
  const neighbour = browser(c6, { 'x-forwarded-for': '2001:db8:5:7::1' });
  await neighbour.get('/dashboard/login');
  assert.equal((await neighbour.post('/dashboard/login', OWNER)).res.status, 303);
});
