import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { insertSinkMessage } from '../../src/sink/store.ts';
import { signedInWithTwoProjects } from './client.ts';

const { ctx, b, a, other, P, Q } = await signedInWithTwoProjects();

test('pages need a session', async () => {
  for (const path of ['/dashboard', `${P}/keys`, `${P}/webhooks`, `${P}/inbox`, `${P}/emails`, `${P}/domains`]) {
    const res = await ctx.app.request(path);
    assert.equal(res.status, 303, path);
    assert.equal(res.headers.get('location'), '/dashboard/login');
  }
  const post = await ctx.app.request(`${P}/keys/${a.keyId}/revoke`, { method: 'POST' });
  assert.ok([303, 403].includes(post.status));
  const [key] = await ctx.sql<[{ revokedAt: Date | null }]>`select revoked_at from api_keys where id = ${a.keyId}`;
  assert.equal(key.revokedAt, null);
});

test('pages carry a strict CSP and are not frameable', async () => {
  const { res } = await b.get('/dashboard');
  const csp = res.headers.get('content-security-policy') ?? '';
  for (const part of ["default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"]) assert.ok(csp.includes(part), csp);
  // Scripts only from this origin: no inline script, no eval, nothing from elsewhere.
  assert.match(csp, /script-src 'self';/);
  assert.doesNotMatch(csp, /unsafe-inline'[^;]*;?\s*$|script-src[^;]*(unsafe|https?:|\*)/);
  assert.equal(res.headers.get('x-frame-options'), 'DENY');
});

test('projects: the owner sees every project and creates one', async () => {
  const list = await b.get('/dashboard');
  assert.match(list.text, /project A/);
  assert.match(list.text, /project B/);
  const made = await b.post('/dashboard/projects', { name: 'Shop <b>' });
  assert.equal(made.res.status, 303);
  assert.match(made.res.headers.get('location')!, /^\/dashboard\/projects\/proj_\w{26}\/keys$/);
  const again = await b.get('/dashboard');
  assert.match(again.text, /Shop &lt;b&gt;/, 'names are escaped');
});

test('keys: created key shown once and works; revoke; another project\'s key is out of reach', async () => {
  await b.get(`${P}/keys`);
  const made = await b.post(`${P}/keys`, { name: 'deploy' });
  assert.equal(made.res.status, 200);
  const key = /id="new-key">(sk_[\w-]{43})</.exec(made.text)?.[1];
  assert.ok(key, 'the full key is on the result page');
  assert.match(made.text, /shown only this once/);
  const api = await ctx.call(key, '/v1/api-keys');
  assert.equal(api.status, 200);
  const list = await b.get(`${P}/keys`);
  assert.ok(!list.text.includes(key), 'the list shows only the prefix');
  assert.ok(list.text.includes(key.slice(0, 12)));
  assert.match(list.text, /<select name="permission"/);

  const sender = await b.post(`${P}/keys`, { name: 'sender', permission: 'sending' });
  const senderKey = /id="new-key">(sk_[\w-]{43})</.exec(sender.text)![1]!;
  assert.equal((await ctx.call(senderKey, '/v1/api-keys')).status, 403, 'a sending key made in the dashboard cannot read');
  assert.match((await b.get(`${P}/keys`)).text, /sending only/);

  const cross = await b.post(`${P}/keys/${other.keyId}/revoke`);
  assert.equal(cross.res.status, 404);
  const [bKey] = await ctx.sql<[{ revokedAt: Date | null }]>`select revoked_at from api_keys where id = ${other.keyId}`;
  assert.equal(bKey.revokedAt, null, "project B's key survives a revoke through project A's URL");

  await b.get(`${P}/keys`);
  const revoked = await b.post(`${P}/keys/${a.keyId}/revoke`);
  assert.equal(revoked.res.status, 303);
  assert.equal((await ctx.call(a.key, '/v1/api-keys')).status, 401);
});

test('CSRF: a missing or wrong token, or a foreign Origin, is a 403 and changes nothing', async () => {
  await b.get(`${Q}/keys`);
  const good = b.csrf;
  for (const [fields, headers] of [
    [{ _csrf: '' }, {}],
    [{ _csrf: 'f'.repeat(64) }, {}],
    [{ _csrf: good }, { origin: 'https://evil.example' }],
  ] as const) {
    const r = await b.post(`${Q}/keys/${other.keyId}/revoke`, fields, { headers });
    assert.equal(r.res.status, 403, JSON.stringify(fields) + JSON.stringify(headers));
    assert.match(r.text, /Forbidden/);
  }
  const noField = await ctx.app.request(`${Q}/projects`, { method: 'POST', headers: { cookie: `mailroom_session=${b.jar.get('mailroom_session')}` } });
  assert.equal(noField.status, 403);
  const [bKey] = await ctx.sql<[{ revokedAt: Date | null }]>`select revoked_at from api_keys where id = ${other.keyId}`;
  assert.equal(bKey.revokedAt, null);
  const sameOrigin = await b.post(`${Q}/keys`, { _csrf: good, name: 'ok' }, { headers: { origin: 'http://localhost' } });
  assert.equal(sameOrigin.res.status, 200, 'a same-origin POST with the token goes through');
});

test('webhooks: register, bad URL inline, edit, disable/enable, secret only on reveal, isolation', async () => {
  await b.get(`${P}/webhooks`);
  const bad = await b.post(`${P}/webhooks`, { url: 'ftp://nope' });
  assert.equal(bad.res.status, 422);
  assert.match(bad.text, /class="error"/);
  assert.match(bad.text, /webhook URL must use/);

  const made = await b.post(`${P}/webhooks`, { url: 'http://127.0.0.1:9/hook' });
  assert.equal(made.res.status, 303);
  const page = made.res.headers.get('location')!;
  const id = page.split('/').at(-1)!;
  const [{ secretEncrypted }] = await ctx.sql<[{ secretEncrypted: Buffer }]>`select secret_encrypted from webhook_endpoints where id = ${id}`;
  assert.ok(secretEncrypted.length > 0);

  const list = await b.get(`${P}/webhooks`);
  assert.match(list.text, /http:\/\/127\.0\.0\.1:9\/hook/);
  assert.doesNotMatch(list.text, /whsec_/, 'no secret on the list page');
  const detail = await b.get(page);
  assert.doesNotMatch(detail.text, /whsec_/, 'nor before reveal');
  const revealed = await b.post(`${page}/secret`);
  const secret = /id="signing-secret">(whsec_[A-Za-z0-9+/]{43}=)</.exec(revealed.text)?.[1];
  assert.ok(secret);

  await b.get(page);
  const edited = await b.post(`${page}/url`, { url: 'http://127.0.0.1:10/new' });
  assert.equal(edited.res.status, 303);
  const badEdit = await b.post(`${page}/url`, { url: 'not a url' });
  assert.equal(badEdit.res.status, 422);
  assert.match(badEdit.text, /not a valid absolute URL/);
  await b.post(`${page}/disable`);
  let [row] = await ctx.sql<[{ url: string; status: string }]>`select url, status from webhook_endpoints where id = ${id}`;
  assert.deepEqual(row, { url: 'http://127.0.0.1:10/new', status: 'disabled_by_user' });
  await b.get(page);
  await b.post(`${page}/enable`);
  [row] = await ctx.sql<[{ url: string; status: string }]>`select url, status from webhook_endpoints where id = ${id}`;
  assert.equal(row.status, 'active');
  const again = await b.post(`${page}/secret`);
  assert.ok(again.text.includes(secret), 'the secret does not change on edit');

  const { endpoint: bHook } = await createEndpoint(ctx.sql, ctx.config, other.projectId, 'http://127.0.0.1:11/b');
  for (const path of [`${P}/webhooks/${bHook.id}`]) assert.equal((await b.get(path)).res.status, 404);
  await b.get(`${P}/webhooks`);
  for (const action of ['secret', 'disable', 'url']) {
    const r = await b.post(`${P}/webhooks/${bHook.id}/${action}`, { url: 'http://127.0.0.1:12/x' });
    assert.equal(r.res.status, 404, action);
    assert.doesNotMatch(r.text, /whsec_/);
  }
  const [bRow] = await ctx.sql<[{ url: string; status: string }]>`select url, status from webhook_endpoints where id = ${bHook.id}`;
  assert.deepEqual(bRow, { url: 'http://127.0.0.1:11/b', status: 'active' });
});

test('inbox: caught HTML only in a sandboxed iframe under its own CSP; script never unescaped', async () => {
  const evil = `<script>document.title='pwned'</script><h1>Hello</h1><img src="https://tracker.example/p.gif">`;
  const raw = Buffer.from(`Subject: hi <script>x</script>\r\nContent-Type: text/html\r\n\r\n${evil}\r\n`);
  const id = await insertSinkMessage(ctx.sql, {
    projectId: a.projectId, emailId: null, raw, fromAddress: 'app@example.com', toAddresses: ['ann@example.net'], ccAddresses: [],
    subject: 'hi <script>x</script>', text: 'Hello <script>alert(1)</script>', html: evil, headers: { 'X-Evil': '<script>h()</script>' },
    attachments: [{ filename: '<b>x.pdf', content_type: 'application/pdf', size_bytes: 3 }],
  } as never, { messages: 100, bytes: 1e9 });

  const list = await b.get(`${P}/inbox`);
  assert.match(list.text, new RegExp(id));
  assert.doesNotMatch(list.text, /<script>/);
  const msg = await b.get(`${P}/inbox/${id}`);
  assert.equal(msg.res.status, 200);
  assert.doesNotMatch(msg.text, /<script>/i, 'no caught script tag anywhere in the page');
  assert.match(msg.text, /&lt;script&gt;document.title=/, 'the raw source is shown escaped');
  assert.match(msg.text, /&lt;b&gt;x.pdf/);
  const frames = [...msg.text.matchAll(/<iframe[^>]*>/g)].map((m) => m[0]);
  assert.equal(frames.length, 1);
  assert.match(frames[0]!, /sandbox=""/);
  assert.doesNotMatch(frames[0]!, /allow-/);
  assert.match(frames[0]!, new RegExp(`src="${P}/inbox/${id}/html"`));
  assert.doesNotMatch(msg.text, /srcdoc/);

  const html = await b.get(`${P}/inbox/${id}/html`);
  assert.equal(html.text, evil);
  const csp = html.res.headers.get('content-security-policy') ?? '';
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /(^|; )sandbox($|;)/);
  assert.doesNotMatch(csp, /script-src|https:/);
  assert.equal(html.res.headers.get('x-content-type-options'), 'nosniff');

  assert.equal((await b.get(`${Q}/inbox/${id}`)).res.status, 404, "another project's URL doesn't reach the message");
  assert.equal((await b.get(`${Q}/inbox/${id}/html`)).res.status, 404);
  assert.equal((await ctx.app.request(`${P}/inbox/${id}/html`)).status, 303, 'the HTML needs a session too');

  await b.get(`${Q}/inbox`);
  await b.post(`${Q}/inbox/clear`);
  assert.equal((await ctx.sql`select 1 from sink_messages where id = ${id}`).length, 1, "emptying B's inbox leaves A's");
  await b.get(`${P}/inbox`);
  const cleared = await b.post(`${P}/inbox/clear`);
  assert.equal(cleared.res.status, 303);
  assert.equal((await ctx.sql`select 1 from sink_messages where project_id = ${a.projectId}`).length, 0);
});

test('emails and domains pages list the project\'s rows, escaped; domain add without SES shows why', async () => {
  const sent = await ctx.call(other.key, '/v1/emails', { method: 'POST', body: { from: 'a@example.com', to: 'b@example.net', subject: '<i>Q</i>', text: 'x' } });
  assert.equal(sent.status, 201);
  const { id } = (await sent.json()) as { id: string };
  const emails = await b.get(`${Q}/emails`);
  assert.match(emails.text, new RegExp(id));
  assert.match(emails.text, /&lt;i&gt;Q&lt;\/i&gt;/);
  assert.match(emails.text, /queued/);
  assert.doesNotMatch((await b.get(`${P}/emails`)).text, new RegExp(id));

  await b.get(`${P}/domains`);
  const add = await b.post(`${P}/domains`, { domain: 'example.com' });
  assert.equal(add.res.status, 422);
  assert.match(add.text, /no SES connection/);
});

test('unknown project or page is a 404 page', async () => {
  assert.equal((await b.get('/dashboard/projects/proj_nope/keys')).res.status, 404);
  for (const path of ['/dashboard/projects/proj_%00/keys', `${P}/inbox/msg_%00`, `${P}/webhooks/wh_%00`, `${P}/inbox/msg_01ARZ3NDEKTSV4RRFFQ69G5FA`]) {
    assert.equal((await b.get(path)).res.status, 404, path);
  }
  assert.equal((await b.get('/dashboard/nope')).res.status, 404);
});
