import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browser } from './client.ts';
import { createInvitation } from '../../src/members/invitations.ts';
import { JOIN_ATTEMPTS_PER_MINUTE } from '../../dashboard/routes/invitations.tsx';
import { hashPassword, PasswordWorkBusy, WorkQueue } from '../../dashboard/password.ts';
import { hmacSha256Hex, randomBase64url } from '../../src/platform/crypto.ts';

// §22.5: joining by invitation checks the per-client limit and the token before any password is
// hashed. Client addresses come from X-Forwarded-For here (TRUST_PROXY), as behind a proxy.

const ctx = await createTestContext({ env: { TRUST_PROXY: 'true' } });
const PASSWORD = 'a long enough password';

/**
 * A client from `address` with the pre-session CSRF cookie, and the form token that goes with it:
 * anyone can make the pair (double submit), so a stranger's flood passes the CSRF check.
 */
async function from(address: string) {
  const b = browser(ctx, { 'x-forwarded-for': address });
  await b.get('/dashboard/login');
  const csrf = hmacSha256Hex(b.jar.get('mailroom_csrf')!, 'mailroom-dashboard-form');
  return { post: (path: string, fields: Record<string, string>) => b.post(path, { _csrf: csrf, ...fields }) };
}

const unknownJoin = (b: Awaited<ReturnType<typeof from>>) => b.post(`/dashboard/join/${randomBase64url(32)}`, { password: PASSWORD });

test('an unknown token answers 410; past the per-client limit, 429 with Retry-After; another client is unaffected', async () => {
  const b = await from('198.51.100.7');
  for (let i = 0; i < JOIN_ATTEMPTS_PER_MINUTE; i++) {
    const { res, text } = await unknownJoin(b);
    assert.equal(res.status, 410, text.slice(0, 200));
  }
  const limited = await unknownJoin(b);
  assert.equal(limited.res.status, 429);
  assert.ok(Number(limited.res.headers.get('retry-after')) >= 1);
  assert.match(limited.text, /Too many attempts/);

  const other = await from('198.51.100.8');
  assert.equal((await unknownJoin(other)).res.status, 410);
});

test('IPv6 clients count per /64: another address of the same /64 shares the budget, another /64 does not', async () => {
  const first = await from('2001:db8:7:1::1');
  for (let i = 0; i < JOIN_ATTEMPTS_PER_MINUTE; i++) assert.equal((await unknownJoin(first)).res.status, 410);
  const sameNetwork = await from('2001:db8:7:1:ffff:ffff:ffff:fffe');
  assert.equal((await unknownJoin(sameNetwork)).res.status, 429);
  const otherNetwork = await from('2001:db8:7:2::1');
  assert.equal((await unknownJoin(otherNetwork)).res.status, 410);
});

test('a real invitation still joins; its spent link then answers 410', async () => {
  const made = await createInvitation(ctx.sql, { email: 'joiner@example.com', role: 'developer', invitedBy: null, baseUrl: 'https://mail.example.com' });
  const path = new URL(made.invite_url).pathname;
  const b = await from('203.0.113.20');
  const joined = await b.post(path, { password: PASSWORD });
  assert.equal(joined.res.status, 303);
  const [member] = await ctx.sql`select role from members where email = 'joiner@example.com'`;
  assert.equal(member?.role, 'developer');
  assert.equal((await (await from('203.0.113.22')).post(path, { password: PASSWORD })).res.status, 410);
});

test('an expired invitation answers 410', async () => {
  const made = await createInvitation(ctx.sql, { email: 'late@example.com', role: 'viewer', invitedBy: null, baseUrl: 'https://mail.example.com' });
  await ctx.sql`update member_invitations set expires_at = now() - interval '1 second' where id = ${made.id}`;
  const b = await from('203.0.113.21');
  assert.equal((await b.post(new URL(made.invite_url).pathname, { password: PASSWORD })).res.status, 410);
  assert.equal((await ctx.sql`select 1 from members where email = 'late@example.com'`).length, 0);
});

test('the hashing queue runs one task at a time in arrival order; past its waiting room it refuses at once', async () => {
  const queue = new WorkQueue(1, 3);
  let running = 0;
  let most = 0;
  const order: number[] = [];
  const releases: Array<() => void> = [];
  const task = (i: number) => queue.run(async () => {
    running++;
    most = Math.max(most, running);
    await new Promise<void>((resolve) => releases.push(resolve));
    order.push(i);
    running--;
    return i;
  });
  const tasks = [0, 1, 2, 3].map(task);
  await assert.rejects(task(4), PasswordWorkBusy);
  for (let i = 0; i < 4; i++) {
    await new Promise((r) => setImmediate(r));
    releases.shift()!();
  }
  assert.deepEqual(await Promise.all(tasks), [0, 1, 2, 3]);
  assert.deepEqual(order, [0, 1, 2, 3]);
  assert.equal(most, 1);
  // Drained, it takes work again.
  assert.equal(await queue.run(async () => 'again'), 'again');
});

test('concurrent password hashes queue and all finish', async () => {
  const hashes = await Promise.all([hashPassword('x'.repeat(16)), hashPassword('y'.repeat(16))]);
  for (const h of hashes) assert.match(h, /^scrypt\$131072\$8\$1\$/);
});
