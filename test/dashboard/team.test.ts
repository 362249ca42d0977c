import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { runCli } from '../helpers/process.ts';
import { sha256 } from '../../src/platform/crypto.ts';
import { browser, memberSession, signIn, OWNER } from './client.ts';

/** §21.2: invitations from the CLI and the Team page, one-time links, role changes and removals. */

const ctx = await createTestContext({ env: { NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://mail.example.com' } });
const owner = browser(ctx);
await signIn(owner);

const sessionsOf = async (memberId: string) =>
  (await ctx.sql<[{ n: number }]>`select count(*)::int as n from dashboard_sessions where member_id = ${memberId}`)[0].n;

test('the signed-up owner is the first member, an owner', async () => {
  const rows = await ctx.sql<{ email: string; role: string }[]>`select email, role from members`;
  assert.deepEqual(rows.map((r) => ({ ...r })), [{ email: OWNER.email, role: 'owner' }]);
  const team = await owner.get('/dashboard/team');
  assert.equal(team.res.status, 200);
  assert.match(team.text, new RegExp(`${OWNER.email}.*\\(you\\)`));
  assert.match(team.text, /<td class="role">owner<\/td>/);
});

test('cli member invite prints the invitation; the link sets a password once, for 7 days', async () => {
  const env = { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, PUBLIC_BASE_URL: 'https://mail.example.com' };
  const run = await runCli(['member', 'invite', '--email', 'Dev@Example.com', '--role', 'developer'], env);
  assert.equal(run.code, 0, run.stderr);
  const made = run.json();
  assert.deepEqual(Object.keys(made), ['id', 'email', 'role', 'invite_url', 'expires_at']);
  assert.match(made.id, /^inv_\w{26}$/);
  assert.equal(made.email, 'dev@example.com');
  assert.equal(made.role, 'developer');
  const days = (Date.parse(made.expires_at) - Date.now()) / 86_400_000;
  assert.ok(days > 6.99 && days <= 7, `expires in ${days} days`);
  const link = new URL(made.invite_url);
  assert.equal(link.origin, 'https://mail.example.com');
  const token = link.pathname.split('/').pop()!;
  const [stored] = await ctx.sql<[{ tokenHash: Buffer }]>`select token_hash from member_invitations where id = ${made.id}`;
  assert.deepEqual(stored.tokenHash, sha256(token), 'only a hash of the token is stored');
  assert.ok(!JSON.stringify(await ctx.sql`select * from member_invitations`).includes(token));

  const bad = await runCli(['member', 'invite', '--email', 'x@example.com', '--role', 'boss'], env);
  assert.notEqual(bad.code, 0);
  assert.match(bad.stderr, /owner, admin, developer, viewer/);

  const invitee = browser(ctx);
  const page = await invitee.get(link.pathname);
  assert.equal(page.res.status, 200);
  assert.match(page.text, /dev@example\.com/);
  assert.match(page.text, /id="invited-role">developer/);
  const short = await invitee.post(link.pathname, { password: 'too short' });
  assert.equal(short.res.status, 422);
  assert.match(short.text, /at least 12 characters/);
  const joined = await invitee.post(link.pathname, { password: 'a long enough password' });
  assert.equal(joined.res.status, 303);
  const home = await invitee.get('/dashboard');
  assert.equal(home.res.status, 200);
  assert.match(home.text, /dev@example\.com \(developer\)/);

  // Once: the link is spent, for a GET and a POST alike, and signs nobody in.
  const again = browser(ctx);
  assert.equal((await again.get(link.pathname)).res.status, 410);
  await again.get('/dashboard/login');
  const reuse = await again.post(link.pathname, { password: 'another long password' });
  assert.equal(reuse.res.status, 410);
  assert.equal(again.jar.has('mailroom_session'), false);
  const [{ n }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from members where email = 'dev@example.com'`;
  assert.equal(n, 1);

  const listed = await runCli(['member', 'list'], env);
  const members = listed.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(members.some((m) => m.email === 'dev@example.com' && m.role === 'developer' && m.last_sign_in_at));

  // The password works at the sign-in page.
  const later = browser(ctx);
  await later.get('/dashboard/login');
  assert.equal((await later.post('/dashboard/login', { email: 'dev@example.com', password: 'a long enough password' })).res.status, 303);
});

test('an expired invitation link does not work', async () => {
  const run = await runCli(['member', 'invite', '--email', 'late@example.com', '--role', 'viewer'], { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY });
  const made = run.json();
  await ctx.sql`update member_invitations set expires_at = now() - interval '1 second' where id = ${made.id}`;
  const b = browser(ctx);
  const path = new URL(made.invite_url).pathname;
  assert.equal((await b.get(path)).res.status, 410);
  // The form's token from any page, then the post: still refused.
  await b.get('/dashboard/login');
  assert.equal((await b.post(path, { password: 'a long enough password' })).res.status, 410);
  assert.equal((await ctx.sql`select 1 from members where email = 'late@example.com'`).length, 0);
});

test('Team page: invite shows the link once; an admin may not invite, change or remove owners', async () => {
  await owner.get('/dashboard/team');
  const made = await owner.post('/dashboard/team/invitations', { email: 'ana@example.com', role: 'admin' });
  assert.equal(made.res.status, 200);
  const link = /id="invite-url">([^<]+)</.exec(made.text)![1]!;
  assert.match(link, /^https:\/\/mail\.example\.com\/dashboard\/join\/[\w-]{43}$/);
  const team = await owner.get('/dashboard/team');
  assert.match(team.text, /ana@example\.com/);
  assert.ok(!team.text.includes(link), 'the list never shows the link again');
  const dup = await owner.post('/dashboard/team/invitations', { email: OWNER.email, role: 'viewer' });
  assert.equal(dup.res.status, 409);

  const admin = await memberSession(ctx, 'admin');
  const toOwner = await admin.b.post('/dashboard/team/invitations', { email: 'boss@example.com', role: 'owner' });
  assert.equal(toOwner.res.status, 403);
  assert.match(toOwner.text, /This needs the owner role/);
  const [ownerRow] = await ctx.sql<[{ id: string }]>`select id from members where email = ${OWNER.email}`;
  await admin.b.get('/dashboard/team');
  assert.equal((await admin.b.post(`/dashboard/team/${ownerRow.id}/role`, { role: 'viewer' })).res.status, 403);
  assert.equal((await admin.b.post(`/dashboard/team/${ownerRow.id}/remove`)).res.status, 403);
  const [still] = await ctx.sql<[{ role: string }]>`select role from members where id = ${ownerRow.id}`;
  assert.equal(still.role, 'owner');
  const adminTeam = await admin.b.get('/dashboard/team');
  assert.doesNotMatch(adminTeam.text, /<option value="owner"/, 'an admin is not offered the owner role');
});

test('a role change or removal ends that member\'s sessions: their next request sees it', async () => {
  const dev = await memberSession(ctx, 'developer');
  const other = await memberSession(ctx, 'viewer');
  assert.equal((await dev.b.get('/dashboard/team')).res.status, 200);

  await owner.get('/dashboard/team');
  const changed = await owner.post(`/dashboard/team/${dev.id}/role`, { role: 'viewer' });
  assert.equal(changed.res.status, 303);
  assert.equal(await sessionsOf(dev.id), 0);
  const next = await dev.b.get('/dashboard/team');
  assert.equal(next.res.status, 303, 'signed out');
  assert.equal(next.res.headers.get('location'), '/dashboard/login');
  assert.match((await owner.get('/dashboard/team')).text, new RegExp(`id="member-${dev.id}">[^]*?<td class="role">viewer`));

  const removed = await owner.post(`/dashboard/team/${other.id}/remove`);
  assert.equal(removed.res.status, 303);
  assert.equal((await other.b.get('/dashboard')).res.status, 303);
  assert.equal((await ctx.sql`select 1 from members where id = ${other.id}`).length, 0);

  const bad = await owner.post(`/dashboard/team/${dev.id}/role`, { role: 'superuser' });
  assert.equal(bad.res.status, 422);
});

test('the last owner can be neither demoted nor removed; with two, one may go', async () => {
  const [me] = await ctx.sql<[{ id: string }]>`select id from members where email = ${OWNER.email}`;
  await owner.get('/dashboard/team');
  const demote = await owner.post(`/dashboard/team/${me.id}/role`, { role: 'admin' });
  assert.equal(demote.res.status, 409);
  assert.match(demote.text, /last owner/);
  const remove = await owner.post(`/dashboard/team/${me.id}/remove`);
  assert.equal(remove.res.status, 409);
  const [row] = await ctx.sql<[{ role: string }]>`select role from members where id = ${me.id}`;
  assert.equal(row.role, 'owner');

  const second = await memberSession(ctx, 'owner');
  const bye = await second.b.post(`/dashboard/team/${me.id}/role`, { role: 'developer' });
  assert.equal(bye.res.status, 303);
  const last = await second.b.post(`/dashboard/team/${second.id}/remove`);
  assert.equal(last.res.status, 409, 'now the second is the last owner');
});

test('the audit log records each member change once, by whom, and never a password or a link', async () => {
  const entries = await ctx.sql<{ action: string; actorType: string; actorLabel: string | null; targetId: string; changes: Record<string, unknown> | null }[]>`
    select action, actor_type, actor_label, target_id, changes from audit_log where action like 'member.%' order by id`;
  const of = (action: string) => entries.filter((e) => e.action === action);
  const invited = of('member.invited');
  assert.ok(invited.some((e) => e.actorType === 'cli' && e.changes?.email === 'dev@example.com' && e.changes?.role === 'developer'));
  assert.ok(invited.some((e) => e.actorType === 'member' && e.actorLabel === OWNER.email && e.changes?.email === 'ana@example.com'));
  const joined = of('member.joined');
  assert.deepEqual(joined.map((e) => [e.actorLabel, e.changes?.method]), [[OWNER.email, 'local'], ['dev@example.com', 'local']]);
  assert.ok(of('member.signed_in').some((e) => e.actorLabel === 'dev@example.com' && e.changes?.method === 'local'));
  assert.ok(of('member.signed_in').some((e) => e.actorLabel === 'dev@example.com' && e.changes?.method === 'invitation'));
  assert.equal(of('member.role_changed').filter((e) => e.changes?.role === 'viewer' && e.actorLabel === OWNER.email).length, 1);
  assert.equal(of('member.removed').length, 1);
  // Refused changes (the last owner, an admin against an owner) recorded nothing.
  assert.equal(of('member.role_changed').filter((e) => e.changes?.role === 'admin').length, 0);
  const all = JSON.stringify(await ctx.sql`select * from audit_log`);
  assert.doesNotMatch(all, /a long enough password|\/dashboard\/join\/[\w-]{20}|scrypt\$/);
});
