import { test } from 'node:test';
import assert from 'node:assert/strict';
import { insertSinkMessage } from '../../src/sink/store.ts';
import { browser, memberSession, signIn } from './client.ts';
import { createTestContext } from '../helpers/app.ts';

// §22.10: every change is in the audit log, and access ends with membership.
const ctx = await createTestContext({ env: { NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://mail.example.com' } });
const owner = browser(ctx);
await signIn(owner);

const entries = (action: string) => ctx.sql<{ actorType: string; actorId: string | null; targetId: string | null; projectId: string | null; changes: Record<string, unknown> | null }[]>`
  select actor_type, actor_id, target_id, project_id, changes from audit_log where action = ${action} order by id`;

const catchMessage = (projectId: string, subject: string) =>
  insertSinkMessage(ctx.sql, {
    projectId, emailId: null, raw: Buffer.from(`Subject: ${subject}\r\n\r\nbody\r\n`),
    fromAddress: 'app@example.com', toAddresses: ['ann@example.net'], ccAddresses: [], subject,
    text: 'body', html: null, headers: {}, attachments: [],
  } as never, { messages: 1000, bytes: 1e9 });

async function invite(b: ReturnType<typeof browser>, email: string, role: string) {
  await b.get('/dashboard/team');
  const res = await b.post('/dashboard/team/invitations', { email, role });
  const link = /id="invite-url">([^<]+)</.exec(res.text)?.[1];
  return { res, link };
}

test('an admin may neither replace nor withdraw an owner\'s invitation (403), and the owner\'s link keeps working', async () => {
  const { link } = await invite(owner, 'next-owner@example.com', 'owner');
  assert.ok(link);
  const [inv] = await ctx.sql<[{ id: string }]>`select id from member_invitations where email = 'next-owner@example.com' and accepted_at is null`;
  const admin = await memberSession(ctx, 'admin');

  const replaced = await invite(admin.b, 'next-owner@example.com', 'viewer');
  assert.equal(replaced.res.res.status, 403);
  assert.match(replaced.res.text, /This needs the owner role/);
  const withdrawn = await admin.b.post(`/dashboard/team/invitations/${inv.id}/withdraw`);
  assert.equal(withdrawn.res.status, 403);
  assert.equal((await browser(ctx).get(new URL(link).pathname)).res.status, 200, 'the owner\'s link still works');
  assert.deepEqual((await entries('member.invitation_withdrawn')).filter((e) => e.targetId === inv.id), []);
});

test('withdrawing or replacing an invitation is recorded as member.invitation_withdrawn, in the same transaction', async () => {
  const admin = await memberSession(ctx, 'admin');
  const first = await invite(admin.b, 'dev-to-be@example.com', 'developer');
  assert.equal(first.res.res.status, 200);
  const [old] = await ctx.sql<[{ id: string }]>`select id from member_invitations where email = 'dev-to-be@example.com' and accepted_at is null`;
  // An admin may replace a developer's invitation: the old link goes (410), and the log says so.
  const second = await invite(admin.b, 'dev-to-be@example.com', 'viewer');
  assert.equal(second.res.res.status, 200);
  assert.equal((await browser(ctx).get(new URL(first.link!).pathname)).res.status, 410);
  const replaced = (await entries('member.invitation_withdrawn')).filter((e) => e.targetId === old.id);
  assert.equal(replaced.length, 1);
  assert.deepEqual([replaced[0]!.actorType, replaced[0]!.actorId, replaced[0]!.projectId], ['member', admin.id, null]);
  assert.deepEqual(replaced[0]!.changes, { email: 'dev-to-be@example.com', role: 'developer', replaced: true });

  // Withdrawing the new one.
  const [current] = await ctx.sql<[{ id: string }]>`select id from member_invitations where email = 'dev-to-be@example.com' and accepted_at is null`;
  const gone = await owner.post(`/dashboard/team/invitations/${current.id}/withdraw`);
  assert.equal(gone.res.status, 303);
  assert.equal((await browser(ctx).get(new URL(second.link!).pathname)).res.status, 410);
  const withdrawn = (await entries('member.invitation_withdrawn')).filter((e) => e.targetId === current.id);
  assert.equal(withdrawn.length, 1);
  assert.deepEqual(withdrawn[0]!.changes, { email: 'dev-to-be@example.com', role: 'viewer' });
  assert.ok(!JSON.stringify(withdrawn).includes(new URL(second.link!).pathname.split('/').pop()!), 'never the link');
  assert.equal((await owner.post(`/dashboard/team/invitations/${current.id}/withdraw`)).res.status, 404, 'once');
});

test('clearing a sink inbox is recorded as sink.cleared, from the API and from the dashboard', async () => {
  const t = await ctx.tenant('sink clears');
  await catchMessage(t.projectId, 'one');
  await catchMessage(t.projectId, 'two');
  assert.equal((await ctx.call(t.key, '/v1/sink/messages', { method: 'DELETE' })).status, 204);
  let cleared = (await entries('sink.cleared')).filter((e) => e.projectId === t.projectId);
  assert.equal(cleared.length, 1);
  assert.deepEqual([cleared[0]!.actorType, cleared[0]!.targetId, cleared[0]!.changes], ['api_key', t.projectId, { removed: 2 }]);

  await catchMessage(t.projectId, 'three');
  await owner.get(`/dashboard/projects/${t.projectId}/inbox`);
  assert.equal((await owner.post(`/dashboard/projects/${t.projectId}/inbox/clear`)).res.status, 303);
  cleared = (await entries('sink.cleared')).filter((e) => e.projectId === t.projectId);
  assert.equal(cleared.length, 2);
  assert.deepEqual([cleared[1]!.actorType, cleared[1]!.changes], ['member', { removed: 1 }]);
  const [left] = await ctx.sql`select count(*)::int as n from sink_messages where project_id = ${t.projectId}`;
  assert.equal(left!.n, 0);

  // Another project's key clears only its own inbox, and the entry is its own.
  const other = await ctx.tenant('other sink');
  await catchMessage(t.projectId, 'kept');
  assert.equal((await ctx.call(other.key, '/v1/sink/messages', { method: 'DELETE' })).status, 204);
  const [kept] = await ctx.sql`select count(*)::int as n from sink_messages where project_id = ${t.projectId}`;
  assert.equal(kept!.n, 1);
  assert.deepEqual((await entries('sink.cleared')).filter((e) => e.projectId === other.projectId).map((e) => e.changes), [{ removed: 0 }]);
});

test('the live-inbox stream of a member who is removed, or whose role changes, closes within 10 s', { timeout: 60_000 }, async () => {
  const t = await ctx.tenant('live boundary');
  const I = `/dashboard/projects/${t.projectId}/inbox`;
  for (const change of ['remove', 'role'] as const) {
    const dev = await memberSession(ctx, 'developer');
    const res = await ctx.app.request(`${I}/live`, { headers: { cookie: [...dev.b.jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
    assert.equal(res.status, 200);
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    const first = await catchMessage(t.projectId, `before ${change}`);
    while (!text.includes(`id: ${first}`)) text += (await reader.read()).value ?? '';

    await owner.get('/dashboard/team');
    const done = change === 'remove'
      ? await owner.post(`/dashboard/team/${dev.id}/remove`)
      : await owner.post(`/dashboard/team/${dev.id}/role`, { role: 'viewer' });
    assert.equal(done.res.status, 303);
    const changedAt = Date.now();
    const after = await catchMessage(t.projectId, `after ${change}`);
    const closed = await Promise.race([
      (async () => { for (;;) { const r = await reader.read(); if (r.done) return true; text += r.value; } })(),
      new Promise<false>((resolve) => setTimeout(() => resolve(false), 10_000)),
    ]);
    if (!closed) await reader.cancel().catch(() => {});
    assert.equal(closed, true, `the stream closed within 10 s of the ${change}`);
    assert.ok(Date.now() - changedAt < 10_000);
    void after;
  }
});
