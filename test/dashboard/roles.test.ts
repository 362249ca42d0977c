import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createDashboard } from '../../dashboard/app.tsx';
import { PERMISSIONS, ROUTES, actionOf, allows } from '../../dashboard/permissions.ts';
import { ROLES, type Role } from '../../src/members/roles.ts';
import { newId } from '../../src/platform/ids.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { createTemplate } from '../../src/templates/service.ts';
import { createInvitation } from '../../src/members/invitations.ts';
import { createContact } from '../../src/contacts/service.ts';
import { createSegment } from '../../src/segments/service.ts';
import { createTopic } from '../../src/topics/service.ts';
import { createImport } from '../../src/contacts/imports/service.ts';
import { createBroadcast } from '../../src/broadcasts/service.ts';
import { createTestContext } from '../helpers/app.ts';
import { memberSession } from './client.ts';

/**
 * §21.1 against the whole authorization table: every route of ROUTES, posted (or read) by each
 * role with its own session and CSRF token. A refused form is a 403 naming the role it needed,
 * and the database is byte for byte what it was.
 */

const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
const { projectId, keyId } = await ctx.tenant('roles');
const { endpoint } = await createEndpoint(ctx.sql, ctx.config, projectId, 'http://127.0.0.1:9/in');
const template = await createTemplate(ctx.sql, projectId, { name: 'Welcome', html: '<p>Hi</p>' });
const segment = await createSegment(ctx.sql, projectId, { name: 'Customers' });
const topic = await createTopic(ctx.sql, projectId, { name: 'News', default_subscription: 'opt_in' });
const contact = await createContact(ctx.sql, projectId, { email: 'ann@example.com', segment_ids: [segment.id] });
const imported = await createImport(ctx.sql, projectId, { file: (async function* () { yield Buffer.from('email\nbo@example.com\n'); })(), fields: {} }, 1 << 20);
const broadcast = await createBroadcast(ctx.sql, projectId, { segment_id: segment.id, from: 'news@example.com', subject: 'Hi', html: '<p>Hi</p>' });
const sessions = Object.fromEntries(await Promise.all(ROLES.map(async (r) => [r, await memberSession(ctx, r)] as const))) as Record<Role, Awaited<ReturnType<typeof memberSession>>>;
const target = await memberSession(ctx, 'developer', 'target@example.com');
const invitation = await createInvitation(ctx.sql, { email: 'invited@example.com', role: 'developer', invitedBy: null, baseUrl: 'http://x' });

const PARAMS: Record<string, string> = {
  projectId, keyId, endpointId: endpoint.id, templateId: template.id, memberId: target.id, invitationId: invitation.id,
  contactId: contact.id, segmentId: segment.id, topicId: topic.id, importId: imported.id, broadcastId: broadcast.id,
  domainId: newId('domain'), deliveryId: newId('delivery'), emailId: newId('email'), messageId: newId('sinkMessage'),
};

/** Fields each form would send: enough that, unchecked, the write would go through. */
const FIELDS: Record<string, Record<string, string>> = {
  '/projects': { name: 'Sneaky' },
  '/team/invitations': { email: 'new@example.com', role: 'viewer' },
  '/team/:memberId/role': { role: 'admin' },
  '/projects/:projectId/suppressions': { email: 'blocked@example.com' },
  '/projects/:projectId/suppressions/lift': { email: 'blocked@example.com' },
  '/projects/:projectId/templates': { name: 'Other', html: '<p>x</p>' },
  '/projects/:projectId/templates/:templateId': { name: 'Renamed', html: '<p>y</p>' },
  '/projects/:projectId/webhooks': { url: 'http://127.0.0.1:9/other' },
  '/projects/:projectId/webhooks/:endpointId/url': { url: 'http://127.0.0.1:9/moved' },
  '/projects/:projectId/domains': { domain: 'mail.example.com' },
  '/projects/:projectId/domains/:domainId/tracking': { open_tracking: 'on' },
  '/projects/:projectId/keys': { name: 'stolen' },
  '/projects/:projectId/contacts': { email: 'new@example.com' },
  '/projects/:projectId/contacts/:contactId': { first_name: 'Renamed', unsubscribed: 'on' },
  '/projects/:projectId/contacts/:contactId/segments': { segment_id: 'x' },
  '/projects/:projectId/contacts/:contactId/topics': { 'topic.x': 'opt_out' },
  '/projects/:projectId/topics': { name: 'Other', default_subscription: 'opt_out' },
  '/projects/:projectId/topics/:topicId': { name: 'Renamed' },
  '/projects/:projectId/segments': { name: 'Other' },
  '/projects/:projectId/segments/:segmentId': { name: 'Renamed' },
  '/projects/:projectId/broadcasts': { segment_id: segment.id, from: 'news@example.com', subject: 'Other', html: '<p>x</p>' },
  '/projects/:projectId/broadcasts/:broadcastId': { segment_id: segment.id, from: 'news@example.com', subject: 'Renamed', html: '<p>y</p>' },
  '/projects/:projectId/broadcasts/:broadcastId/test': { to: 'qa@example.com' },
  '/projects/:projectId/broadcasts/:broadcastId/send': { scheduled_at: 'in 1 hour' },
};

const url = (path: string) => `/dashboard${path === '/' ? '' : path}`.replace(/:(\w+)/g, (_, name: string) => PARAMS[name]!);
/** A form's URL as its page has it: the streamed import upload carries its token in the query. */
const formUrl = (path: string, csrf: string) => (path.endsWith('/imports') ? `${url(path)}?_csrf=${csrf}` : url(path));

/** Every row of every table, hashed: what a refused request must leave untouched. */
async function fingerprint(): Promise<string> {
  const tables = await ctx.sql<{ name: string }[]>`
    select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by 1`;
  const parts: string[] = [];
  for (const { name } of tables) {
    const [row] = await ctx.sql<[{ h: string | null }]>`select md5(string_agg(t::text, '|' order by t::text)) as h from ${ctx.sql(name)} t`;
    parts.push(`${name}:${row.h}`);
  }
  return parts.join('\n');
}

test('every route of the dashboard is in the table, and every action of the table is used or awaited', () => {
  const PUBLIC = /^\/dashboard\/(signup|login|logout|join\/:token|oidc\/[\w/]+|assets\/.+)$/;
  const registered = createDashboard().routes.filter((r) => r.method !== 'ALL' && r.path !== '/*' && r.path !== '*');
  for (const r of registered) {
    const path = `/dashboard${r.path === '/' ? '' : r.path}`;
    if (PUBLIC.test(path)) continue;
    assert.ok(actionOf(r.method, path.replace(/:(\w+)/g, (_, n: string) => PARAMS[n] ?? 'x')), `${r.method} ${path} has a line in ROUTES`);
  }
  for (const [action, roles] of Object.entries(PERMISSIONS)) {
    assert.ok(roles.includes('owner'), `${action}: an owner may do everything`);
  }
  assert.deepEqual([...PERMISSIONS.read], [...ROLES], 'every role reads every page');
  for (const [, , action] of ROUTES) if (action !== 'read') assert.ok(!allows('viewer', action), `a viewer may not ${action}`);
});

test('every form, posted by a role the table refuses, is a 403 naming the role and stores nothing', async () => {
  let refused = 0;
  for (const [method, path, action] of ROUTES) {
    for (const role of ROLES) {
      if (allows(role, action)) continue;
      const b = sessions[role].b;
      await b.get('/dashboard');
      const before = await fingerprint();
      const { res, text } = method === 'POST' ? await b.post(formUrl(path, b.csrf), FIELDS[path] ?? {}) : await b.get(url(path));
      assert.equal(res.status, 403, `${role} ${method} ${path}`);
      const least = PERMISSIONS[action].at(-1)!;
      assert.match(text, new RegExp(`This needs the ${least} role`), `${role} POST ${path}: the page names the role needed`);
      assert.match(text, new RegExp(`signed in as an? ${role}`));
      assert.equal(await fingerprint(), before, `${role} POST ${path} stored nothing`);
      refused++;
    }
  }
  assert.ok(refused >= 28, `refused ${refused} requests`);
});

test('a viewer reads every page, sees no form but sign-out and no secret', async () => {
  const b = sessions.viewer.b;
  for (const [method, path, action] of ROUTES) {
    if (method !== 'GET' || path.endsWith('/live') || !allows('viewer', action)) continue;
    const { res, text } = await b.get(url(path));
    assert.notEqual(res.status, 403, `viewer GET ${path}`);
    if (res.status !== 200) continue;
    const posts = [...text.matchAll(/<form method="post" action="([^"]+)"/g)].map((m) => m[1]);
    assert.ok(posts.every((p) => p === '/dashboard/logout'), `viewer GET ${path}: only the sign-out form, not ${posts.join(', ')}`);
    assert.doesNotMatch(text, /sk_[\w-]{20}|whsec_/, `viewer GET ${path}: no secret`);
  }
  const endpointPage = await b.get(url('/projects/:projectId/webhooks/:endpointId'));
  assert.doesNotMatch(endpointPage.text, /Reveal signing secret|Signing secret/);
  // Settings a form shows stay readable, in a disabled fieldset that cannot be sent.
  const draft = await b.get(url('/projects/:projectId/templates/:templateId'));
  assert.match(draft.text, /<fieldset disabled="" class="read-only">[^]*&lt;p&gt;Hi&lt;\/p&gt;/);
  const keys = await b.get(url('/projects/:projectId/keys'));
  assert.doesNotMatch(keys.text, /New key|>Revoke</);
});

test('the roles the table allows get past it', async () => {
  for (const [method, path, action] of ROUTES) {
    if (method !== 'POST' || path === '/logout') continue;
    for (const role of ROLES) {
      if (!allows(role, action)) continue;
      const b = sessions[role].b;
      await b.get('/dashboard');
      const { res } = await b.post(formUrl(path, b.csrf), FIELDS[path] ?? {});
      assert.notEqual(res.status, 403, `${role} POST ${path}`);
    }
  }
});

test('a developer deletes a webhook endpoint and a domain with their pages\' buttons, recorded as that member', async () => {
  const { b, id: memberId } = sessions.developer;
  const hook = await createEndpoint(ctx.sql, ctx.config, projectId, 'http://127.0.0.1:9/to-delete');
  const domainId = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values (${domainId}, ${projectId}, 'gone.example.com', 'us-east-1', 'success')`;

  const hookPage = url(`/projects/:projectId/webhooks/${hook.endpoint.id}`);
  assert.match((await b.get(hookPage)).text, new RegExp(`action="${hookPage}/delete"`));
  const domainsPage = url('/projects/:projectId/domains');
  assert.match((await b.get(domainsPage)).text, new RegExp(`action="${domainsPage}/${domainId}/delete"`));

  const gone = await b.post(`${hookPage}/delete`, {});
  assert.equal(gone.res.status, 303);
  assert.equal((await b.get(hookPage)).res.status, 404);
  assert.equal((await b.post(`${domainsPage}/${domainId}/delete`, {})).res.status, 303);
  assert.equal((await ctx.sql`select 1 from domains where id = ${domainId}`).length, 0);
  assert.equal((await b.post(`${domainsPage}/${domainId}/delete`, {})).res.status, 404, 'already deleted');
  const receiving = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status, receiving)
    values (${receiving}, ${projectId}, 'in.example.com', 'us-east-1', 'success', ${ctx.sql.json({ status: 'active' })})`;
  const refused = await b.post(`${domainsPage}/${receiving}/delete`, {});
  assert.equal(refused.res.status, 409, 'receiving on');
  assert.match(refused.text, /receiving/);
  assert.equal((await ctx.sql`select 1 from domains where id = ${receiving}`).length, 1);

  const entries = await ctx.sql<{ action: string; actorType: string; actorId: string }[]>`
    select action, actor_type, actor_id from audit_log where target_id in (${hook.endpoint.id}, ${domainId}) and action like '%.deleted' order by id`;
  assert.deepEqual([...entries], [
    { action: 'webhook.deleted', actorType: 'member', actorId: memberId },
    { action: 'domain.deleted', actorType: 'member', actorId: memberId },
  ]);
});
