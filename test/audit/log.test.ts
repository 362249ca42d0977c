import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startFakeSesIdentities } from '../helpers/fake-ses-identities.ts';
import { connectProvider } from '../../src/providers/connections.ts';
import { browser, signIn, OWNER } from '../dashboard/client.ts';
import { createApiKey } from '../../src/keys/service.ts';
import { createProject } from '../../src/projects/service.ts';
import { pruneAuditLog } from '../../src/audit/prune.ts';
import { recordAudit } from '../../src/audit/record.ts';
import { actingAs } from '../../src/audit/actor.ts';

const ses = await startFakeSesIdentities();
const ctx = await createTestContext({ env: { AWS_ENDPOINT_URL_SESV2: ses.url, WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' } });

/** A project with a key and an SES connection, made the way the CLI would. */
async function project(opts: { name?: string } = {}) {
  const t = await ctx.tenant(opts.name);
  await connectProvider(ctx.sql, ctx.config, { projectId: t.projectId, region: 'us-east-1', accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'fake-secret' });
  return t;
}

type Entry = { id: string; at: string; actor: { type: string; id: string | null; label: string | null }; action: string; project_id: string | null; target: { type: string; id: string | null }; ip: string | null; changes: Record<string, unknown> | null };

async function entries(projectId: string): Promise<Entry[]> {
  const rows = await ctx.sql<{ e: Entry }[]>`
    select json_build_object('id', id, 'at', at, 'actor', json_build_object('type', actor_type, 'id', actor_id, 'label', actor_label),
      'action', action, 'project_id', project_id, 'target', json_build_object('type', target_type, 'id', target_id), 'ip', ip, 'changes', changes) as e
    from audit_log where project_id = ${projectId} order by id`;
  return rows.map((r) => r.e);
}

/** Each action exactly once, in order, all by `actor`. */
function assertActions(list: Entry[], actions: string[], actor: { type: string; id: string | null }) {
  assert.deepEqual(list.map((e) => e.action), actions);
  for (const e of list) assert.deepEqual({ type: e.actor.type, id: e.actor.id }, actor, e.action);
}

async function scanForSecrets() {
  const [row] = await ctx.sql<[{ dump: string }]>`select coalesce(string_agg(audit_log::text, E'\n'), '') as dump from audit_log`;
  return row.dump;
}

test('API: every change a key makes is recorded once, as that key, with the request address; GET /v1/audit-log lists them', async () => {
  const t = await project({ name: 'api' });
  const [domain] = await ctx.sql<[{ id: string }]>`
    insert into domains (id, project_id, value, region, verification_status) values ('dom_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z', ${t.projectId}, 'api.example.com', 'us-east-1', 'success')
    returning id`;
  const before = (await entries(t.projectId)).length;
  const headers = { 'x-forwarded-for': '203.0.113.9' };
  const call = (path: string, init: { method?: string; body?: unknown } = {}) => ctx.call(t.key, path, { ...init, headers });

  assert.equal((await call('/v1/suppressions', { method: 'POST', body: { email: 'Ann@Example.net' } })).status, 201);
  assert.equal((await call('/v1/suppressions', { method: 'POST', body: { email: 'ann@example.net' } })).status, 200, 'already there: no change');
  assert.equal((await call('/v1/suppressions/ann%40example.net', { method: 'DELETE' })).status, 204);
  const created = await call('/v1/templates', { method: 'POST', body: { name: 'Welcome', alias: 'welcome', html: '<p>Hi</p>' } });
  assert.equal(created.status, 201);
  const tmpl = (await created.json()) as { id: string };
  assert.equal((await call(`/v1/templates/${tmpl.id}`, { method: 'PATCH', body: { subject: 'Hello' } })).status, 200);
  assert.equal((await call(`/v1/templates/${tmpl.id}/publish`, { method: 'POST' })).status, 200);
  assert.equal((await call(`/v1/templates/${tmpl.id}/publish`, { method: 'POST' })).status, 200, 'unchanged draft: no change');
  assert.equal((await call('/v1/templates', { method: 'POST', body: { name: 'Dup', alias: 'welcome', html: '<p>x</p>' } })).status, 422, 'a refused change');
  assert.equal((await call(`/v1/domains/${domain.id}`, { method: 'PATCH', body: { tracking_domain: 'links.api.example.com', open_tracking: true } })).status, 200);
  assert.equal((await call(`/v1/templates/${tmpl.id}`, { method: 'DELETE' })).status, 204);
  // The Resend-compatible surface goes through the same services.
  const viaResend = await ctx.call(t.key, '/resend/templates', { method: 'POST', body: { name: 'R', html: '<p>r</p>' }, headers });
  assert.equal(viaResend.status, 200);

  const list = (await entries(t.projectId)).slice(before);
  assertActions(list, [
    'suppression.added', 'suppression.removed', 'template.created', 'template.updated', 'template.published',
    'domain.updated', 'template.deleted', 'template.created',
  ], { type: 'api_key', id: t.keyId });
  for (const e of list) {
    assert.equal(e.actor.label, 'test key');
    assert.equal(e.project_id, t.projectId);
    assert.match(e.id, /^aud_[0-9A-HJKMNP-TV-Z]{26}$/);
  }
  assert.deepEqual(list[0]!.target, { type: 'suppression', id: 'ann@example.net' });
  assert.deepEqual(list[0]!.changes, { address: 'ann@example.net', reason: 'manual' });
  assert.deepEqual(list[3]!.changes, { fields: ['subject'] });
  assert.deepEqual(list[4]!.changes, { version: 1 });
  assert.deepEqual(list[5]!.changes, { open_tracking: true, tracking_domain: 'links.api.example.com' });

  // The API: newest first, the key's project only, paged, filtered by action.
  const res = await ctx.call(t.key, '/v1/audit-log?limit=3');
  assert.equal(res.status, 200);
  const page = (await res.json()) as { data: Entry[]; has_more: boolean };
  assert.equal(page.has_more, true);
  const all = await entries(t.projectId);
  assert.deepEqual(page.data.map((e) => e.id), all.slice(-3).reverse().map((e) => e.id));
  assert.deepEqual(Object.keys(page.data[0]!), ['id', 'at', 'actor', 'action', 'project_id', 'target', 'ip', 'changes']);
  assert.ok(Date.parse(page.data[0]!.at));
  const next = (await (await ctx.call(t.key, `/v1/audit-log?limit=100&starting_after=${page.data[2]!.id}`)).json()) as { data: Entry[]; has_more: boolean };
  assert.deepEqual(next.data.map((e) => e.id), all.slice(0, -3).reverse().map((e) => e.id));
  assert.equal(next.has_more, false);
  const published = (await (await ctx.call(t.key, '/v1/audit-log?action=template.published')).json()) as { data: Entry[] };
  assert.deepEqual(published.data.map((e) => e.action), ['template.published']);
});

test('API: the audit log is for full keys, of their own project; bad paging and filters are 4xx', async () => {
  const a = await project({ name: 'a' });
  const b = await project({ name: 'b' });
  const sending = await createApiKey(ctx.sql, a.projectId, 'sender', 'sending');
  assert.equal((await ctx.call(sending.key, '/v1/audit-log')).status, 403);
  assert.equal((await ctx.call(undefined, '/v1/audit-log')).status, 401);
  const ofA = (await (await ctx.call(a.key, '/v1/audit-log?limit=100')).json()) as { data: Entry[] };
  assert.ok(ofA.data.length > 0);
  assert.ok(ofA.data.every((e) => e.project_id === a.projectId));
  const foreign = ((await (await ctx.call(b.key, '/v1/audit-log')).json()) as { data: Entry[] }).data[0]!.id;
  assert.equal((await ctx.call(a.key, `/v1/audit-log?starting_after=${foreign}`)).status, 404, 'another project\'s entry is no cursor');
  assert.equal((await ctx.call(a.key, '/v1/audit-log?starting_after=nope')).status, 404);
  assert.equal((await ctx.call(a.key, '/v1/audit-log?action=email.sent')).status, 422);
  assert.equal((await ctx.call(a.key, '/v1/audit-log?limit=0')).status, 422);
  // Sending is not an audit event.
  const sent = await ctx.call(a.key, '/v1/emails', { method: 'POST', body: { from: 'a@api.example.com', to: 'b@example.net', subject: 's', text: 't' } });
  assert.ok(sent.status < 500);
  assert.equal((await ctx.sql`select 1 from audit_log where action like 'email.%'`).length, 0);
});

test('dashboard: every change is recorded once as the signed-in person, with their address', async () => {
  const b = browser(ctx, { 'x-forwarded-for': '198.51.100.7' });
  await signIn(b);
  const [owner] = await ctx.sql<[{ id: string }]>`select id from members where email = ${OWNER.email}`;
  const made = await b.post('/dashboard/projects', { name: 'Dash' });
  assert.equal(made.res.status, 303);
  const projectId = /projects\/(proj_[0-9A-Z]+)/.exec(made.res.headers.get('location')!)![1]!;
  await ctx.sql`insert into provider_connections (project_id, region, access_key_id, secret_access_key_encrypted, ses_account_id)
    select ${projectId}, region, access_key_id, secret_access_key_encrypted, ses_account_id from provider_connections limit 1`;
  const P = `/dashboard/projects/${projectId}`;
  await b.get(`${P}/keys`);
  const key = await b.post(`${P}/keys`, { name: 'dash key', permission: 'full' });
  assert.equal(key.res.status, 200);
  const [keyRow] = await ctx.sql<[{ id: string }]>`select id from api_keys where project_id = ${projectId}`;
  assert.equal((await b.post(`${P}/keys/${keyRow.id}/revoke`)).res.status, 303);
  assert.equal((await b.post(`${P}/webhooks`, { url: 'https://127.0.0.1:9/hook/secret-token?sig=abc' })).res.status, 303);
  const [wh] = await ctx.sql<[{ id: string }]>`select id from webhook_endpoints where project_id = ${projectId}`;
  await b.get(`${P}/webhooks/${wh.id}`);
  assert.equal((await b.post(`${P}/webhooks/${wh.id}/url`, { url: 'https://127.0.0.1:9/other' })).res.status, 303);
  assert.equal((await b.post(`${P}/webhooks/${wh.id}/disable`)).res.status, 303);
  assert.equal((await b.post(`${P}/webhooks/${wh.id}/secret`)).res.status, 200, 'revealing the secret changes nothing');
  const rotated = await b.post(`${P}/webhooks/${wh.id}/rotate-secret`);
  assert.equal(rotated.res.status, 200);
  const newSecret = /id="signing-secret">(whsec_[^<]+)</.exec(rotated.text)![1]!;
  assert.equal((await b.post(`${P}/domains`, { domain: 'dash.example.com' })).res.status, 303);
  const [dom] = await ctx.sql<[{ id: string }]>`select id from domains where project_id = ${projectId}`;
  // A tracking domain goes only under a verified domain (§22.11).
  await ctx.sql`update domains set verification_status = 'success' where id = ${dom.id} and project_id = ${projectId}`;
  assert.equal((await b.post(`${P}/domains/${dom.id}/tracking`, { tracking_domain: 't.dash.example.com', click_tracking: 'on' })).res.status, 303);
  await b.get(`${P}/suppressions`);
  assert.equal((await b.post(`${P}/suppressions`, { email: 'bob@example.net' })).res.status, 303);
  assert.equal((await b.post(`${P}/suppressions/lift`, { email: 'bob@example.net' })).res.status, 303);
  const tmpl = await b.post(`${P}/templates`, { name: 'T', alias: 't', html: '<p>x</p>' });
  assert.equal(tmpl.res.status, 303);
  const tmplId = /templates\/(tmpl_[0-9A-Z]+)/.exec(tmpl.res.headers.get('location')!)![1]!;
  await b.get(`${P}/templates/${tmplId}`);
  assert.equal((await b.post(`${P}/templates/${tmplId}/publish`)).res.status, 303);

  const list = await entries(projectId);
  assertActions(list, [
    'project.created', 'api_key.created', 'api_key.revoked', 'webhook.created', 'webhook.updated', 'webhook.updated',
    'webhook.secret_rotated', 'domain.created', 'domain.updated', 'suppression.added', 'suppression.removed', 'template.created', 'template.published',
  ], { type: 'member', id: owner.id });
  for (const e of list) {
    assert.equal(e.actor.label, OWNER.email);
    assert.equal(e.ip, null, 'in-process requests have no peer; a forwarded header from an untrusted peer proves nothing');
  }
  assert.deepEqual(list[1]!.changes, { name: 'dash key', permission: 'full' });
  assert.deepEqual(list[3]!.changes, { url: 'https://127.0.0.1:9/…', enabled: true, event_types: null });
  assert.deepEqual(list[5]!.changes, { enabled: false });
  assert.deepEqual(list[6]!.changes, null);
  assert.deepEqual(list[7]!.changes, { name: 'dash.example.com', region: 'us-east-1', mail_from_domain: null });
  assert.ok(!(await scanForSecrets()).includes(newSecret.slice(6)));
});

test('no entry ever holds a key, a signing secret or a password', async () => {
  // Everything above ran; add a CLI-shaped key creation and a name that looks like a key.
  const p = await createProject(ctx.sql, 'secrets');
  const k = await createApiKey(ctx.sql, p.id, 'copy of sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
  const dump = await scanForSecrets();
  assert.ok(dump.includes('api_key.created'));
  assert.ok(!dump.includes(k.key));
  assert.ok(!dump.includes(k.keyPrefix), 'not even the prefix');
  assert.ok(!/sk_/.test(dump), 'no sk_');
  assert.ok(!/whsec_/.test(dump), 'no whsec_');
  assert.ok(!dump.includes(OWNER.password));
  assert.ok(!/password/i.test(dump));
  assert.ok(!dump.includes('fake-secret'), 'no AWS secret');
  assert.ok(!dump.includes('secret-token'), 'no webhook URL path');
});

test('entries are never edited or deleted, except by AUDIT_RETENTION_DAYS pruning', async () => {
  assert.equal(ctx.config.auditRetentionDays, 400);
  const p = await createProject(ctx.sql, 'immutable');
  const [e] = await ctx.sql<[{ id: string }]>`select id from audit_log where project_id = ${p.id}`;
  await assert.rejects(ctx.sql`update audit_log set action = 'project.renamed' where id = ${e.id}`, /never edited or deleted/);
  await assert.rejects(ctx.sql`delete from audit_log where id = ${e.id}`, /never edited or deleted/);
  await assert.rejects(ctx.sql`truncate audit_log`, /never edited or deleted/);
  // An entry 401 days old, written as the system (the worker) would write one.
  await ctx.sql.begin((tx) => recordAudit(tx, { action: 'reputation.paused', projectId: p.id, target: { type: 'reputation', id: p.id }, changes: { reason: 'bounce rate' } }));
  await ctx.sql.begin(async (tx) => {
    await tx`select set_config('mailroom.audit_prune', 'on', true)`;
    await tx`delete from audit_log where project_id = ${p.id} and action = 'reputation.paused'`;
  });
  await ctx.sql`alter table audit_log disable trigger audit_log_immutable`;
  await ctx.sql`update audit_log set at = now() - interval '401 days' where id = ${e.id}`;
  await ctx.sql`alter table audit_log enable trigger audit_log_immutable`;
  assert.equal(await pruneAuditLog(ctx.sql, 400), 1);
  assert.equal((await ctx.sql`select 1 from audit_log where id = ${e.id}`).length, 0);
  assert.ok((await ctx.sql`select count(*)::int as n from audit_log`)[0]!.n > 10, 'the rest stay');
});

test('a change that fails leaves no entry, and an entry cannot commit without its change', async () => {
  const p = await createProject(ctx.sql, 'atomic');
  const count = async () => (await ctx.sql`select count(*)::int as n from audit_log where project_id = ${p.id}`)[0]!.n as number;
  const n = await count();
  await assert.rejects(ctx.sql.begin(async (tx) => {
    await recordAudit(tx, { action: 'api_key.created', projectId: p.id, target: { type: 'api_key', id: 'key_x' } });
    throw new Error('the change failed');
  }));
  assert.equal(await count(), n);
  // Outside any request or command, the actor is the system; an explicit one wins.
  await ctx.sql.begin((tx) => recordAudit(tx, { action: 'reputation.resumed', projectId: p.id, target: { type: 'reputation', id: p.id } }));
  await actingAs({ type: 'cli', id: 'ops', label: 'cli (ops)', ip: null }, () =>
    ctx.sql.begin((tx) => recordAudit(tx, { action: 'reputation.paused', projectId: p.id, target: { type: 'reputation', id: p.id } })));
  const last = (await entries(p.id)).slice(-2);
  assert.deepEqual(last.map((e) => e.actor.type), ['system', 'cli']);
  assert.equal(last[1]!.actor.id, 'ops');
});

test('dashboard: the Audit page lists every project\'s entries, filters them, pages, and answers 404 to filters that name nothing', async () => {
  const b = browser(ctx);
  await signIn(b, OWNER, 'login');
  const all = await b.get('/dashboard/audit');
  assert.equal(all.res.status, 200);
  assert.match(all.text, /<h1>Audit log<\/h1>/);
  assert.match(all.text, /suppression\.added/);
  assert.match(all.text, /project\.created/);
  const p = await createProject(ctx.sql, 'filtered');
  const only = await b.get(`/dashboard/audit?project=${p.id}`);
  assert.equal((only.text.match(/<code>project\.created<\/code>/g) ?? []).length, 1);
  assert.ok(!only.text.includes('<code>suppression.added</code>'));
  const byAction = await b.get('/dashboard/audit?action=api_key.revoked');
  assert.ok(byAction.text.includes('<code>api_key.revoked</code>'));
  assert.ok(!byAction.text.includes('<code>project.created</code>'));
  const system = await b.get('/dashboard/audit?actor=system%3A');
  assert.ok(!system.text.includes('<code>suppression.added</code>'));
  for (const bad of ['project=nope', 'actor=robot%3Ax', 'action=email.sent', 'after=aud_01JD3Z8K6Q5W0R1S2T3V4X5Y6Z']) {
    assert.equal((await b.get(`/dashboard/audit?${bad}`)).res.status, 404, bad);
  }
  await ctx.sql.begin(async (tx) => {
    for (let i = 0; i < 50; i++) await recordAudit(tx, { action: 'reputation.paused', projectId: p.id, target: { type: 'reputation', id: p.id } });
  });
  const total = (await ctx.sql`select count(*)::int as n from audit_log`)[0]!.n as number;
  const first = await b.get('/dashboard/audit');
  assert.equal((first.text.match(/<tr>/g) ?? []).length - 1, 50);
  const next = /href="([^"]+)" rel="next"/.exec(first.text)![1]!.replaceAll('&amp;', '&');
  const second = await b.get(next);
  assert.equal(second.res.status, 200);
  assert.equal((second.text.match(/<tr>/g) ?? []).length - 1, Math.min(50, total - 50));
});
