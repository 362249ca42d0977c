import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { settled } from '../sending/fixtures.ts';
import { newId } from '../../src/platform/ids.ts';

// The per-domain switches (§15.1) on an instance without PUBLIC_BASE_URL: a tracking domain is
// the only base, so switching on without one is refused.
const ctx = await createTestContext();
await startTestWorker(ctx.config, ctx.sql);
const ROOT = path.resolve(import.meta.dirname, '../..');

/** A verified domain row as `domain add` and a later check leave it (SES itself is not needed here). */
async function domainFor(projectId: string, value: string) {
  const id = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status, dkim_status)
    values (${id}, ${projectId}, ${value}, 'us-east-1', 'success', 'success')`;
  return id;
}

const patch = (key: string, id: string, body: unknown) => ctx.call(key, `/v1/domains/${id}`, { method: 'PATCH', body });

function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('npm', ['run', '--silent', 'cli', '--', ...args], {
      cwd: ROOT,
      env: { PATH: `${path.join(ROOT, 'node_modules/.bin')}:${process.env.PATH}`, HOME: process.env.HOME, DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY },
    }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
  });
}

test('tracking is off by default and shown on every domain', async () => {
  const t = await ctx.tenant();
  const id = await domainFor(t.projectId, 'shop.example');
  const list = (await (await ctx.call(t.key, '/v1/domains')).json()) as { data: Record<string, unknown>[] };
  const d = list.data.find((x) => x.id === id)!;
  assert.equal(d.open_tracking, false);
  assert.equal(d.click_tracking, false);
  assert.equal(d.tracking_domain, null);
});

test('PATCH /v1/domains/{id}: switching on with neither a tracking domain nor PUBLIC_BASE_URL is 422, and nothing changes', async () => {
  const t = await ctx.tenant();
  const id = await domainFor(t.projectId, 'shop.example');
  const res = await patch(t.key, id, { open_tracking: true, click_tracking: true });
  assert.equal(res.status, 422);
  const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
  assert.deepEqual(body.detail.map((d) => [d.loc, d.type]), [[['body', 'open_tracking'], 'tracking_unavailable'], [['body', 'click_tracking'], 'tracking_unavailable']]);
  const [row] = await ctx.sql`select open_tracking, click_tracking from domains where id = ${id} and project_id = ${t.projectId}`;
  assert.deepEqual({ ...row }, { openTracking: false, clickTracking: false });

  const withHost = await patch(t.key, id, { click_tracking: true, tracking_domain: 'Track.Shop.Example' });
  assert.equal(withHost.status, 200, await withHost.clone().text());
  const d = (await withHost.json()) as Record<string, unknown>;
  assert.deepEqual([d.id, d.open_tracking, d.click_tracking, d.tracking_domain], [id, false, true, 'track.shop.example']);

  // Clearing the host while a switch is on would leave the links without a base.
  const cleared = await patch(t.key, id, { tracking_domain: null });
  assert.equal(cleared.status, 422);
  const off = await patch(t.key, id, { click_tracking: false, tracking_domain: null });
  assert.equal(off.status, 200);
  assert.equal(((await off.json()) as Record<string, unknown>).tracking_domain, null);
});

test('PATCH /v1/domains/{id}: bad input is 422, unknown or foreign domains 404', async () => {
  const t = await ctx.tenant();
  const other = await ctx.tenant();
  const id = await domainFor(t.projectId, 'shop.example');
  const foreign = await domainFor(other.projectId, 'other.example');
  for (const [body, loc] of [
    [{ tracking_domain: 'https://track.shop.example/' }, ['body', 'tracking_domain']],
    [{ tracking_domain: 'not a host' }, ['body', 'tracking_domain']],
    [{ open_tracking: 'yes' }, ['body', 'open_tracking']],
    [{ tls: 'enforced' }, ['body']],
    [{}, ['body']],
  ] as const) {
    const res = await patch(t.key, id, body);
    assert.equal(res.status, 422, JSON.stringify(body));
    const detail = ((await res.json()) as { detail: { loc: unknown[] }[] }).detail;
    assert.deepEqual(detail[0]!.loc.slice(0, loc.length), loc, JSON.stringify(detail));
  }
  assert.equal((await patch(t.key, foreign, { click_tracking: false })).status, 404);
  const { createApiKey } = await import('../../src/keys/service.ts');
  const sending = await createApiKey(ctx.sql, t.projectId, 'sender', 'sending');
  assert.equal((await patch(sending.key, id, { click_tracking: false })).status, 403, 'a sending key cannot change a domain');
  assert.equal((await patch(t.key, newId('domain'), { click_tracking: false })).status, 404);
  assert.equal((await patch(t.key, 'dom_nope', { click_tracking: false })).status, 404);
  const doc = (await (await ctx.call(undefined, '/openapi.json')).json()) as { paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
  assert.deepEqual(Object.keys(doc.paths['/v1/domains/{domain_id}']!.patch!.responses).sort(), ['200', '401', '404', '422', '429']);
});

test('the domain\'s switches apply to mail from it, through its tracking domain; a send\'s own switch overrides them', async () => {
  const t = await ctx.tenant();
  const id = await domainFor(t.projectId, 'shop.example');
  assert.equal((await patch(t.key, id, { open_tracking: true, click_tracking: true, tracking_domain: 'track.shop.example' })).status, 200);
  const html = '<p><a href="https://shop.example/a">a</a></p>';
  const sendAndCatch = async (body: Record<string, unknown>) => {
    const res = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { to: 'ann@example.net', subject: 's', html, text: 'a', ...body } });
    assert.equal(res.status, 201, await res.clone().text());
    const { id: emailId } = (await res.json()) as { id: string };
    assert.equal((await settled(ctx.sql, t.projectId, emailId)).status, 'sent');
    const [row] = await ctx.sql<[{ html: string }]>`select html from sink_messages where project_id = ${t.projectId} and email_id = ${emailId}`;
    return row.html;
  };
  const tracked = await sendAndCatch({ from: 'Shop <news@Shop.Example>' });
  assert.match(tracked, /^<p><a href="https:\/\/track\.shop\.example\/t\/c\/[A-Za-z0-9_-]{62}">a<\/a><\/p><img src="https:\/\/track\.shop\.example\/t\/o\/[A-Za-z0-9_-]{62}"/);
  // The route answers whatever host the proxy forwards it under.
  const token = /\/t\/c\/([A-Za-z0-9_-]+)/.exec(tracked)![1];
  const click = await ctx.app.request(`https://track.shop.example/t/c/${token}`);
  assert.equal(click.status, 302);
  assert.equal(click.headers.get('location'), 'https://shop.example/a');

  assert.equal(await sendAndCatch({ from: 'news@shop.example', track_opens: false, track_clicks: false }), html, 'the send switched both off');
  assert.equal(await sendAndCatch({ from: 'news@elsewhere.example' }), html, 'another domain: off');
});

test('CLI: domain update switches tracking and sets the tracking domain; a refusal exits 1 with one line', async () => {
  const t = await ctx.tenant();
  const id = await domainFor(t.projectId, 'cli.example');
  const refused = await cli(['domain', 'update', id, '--open-tracking', 'on']);
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^mailroom: tracking needs a base for its links.*\n$/);
  const on = await cli(['domain', 'update', id, '--open-tracking', 'on', '--click-tracking', 'on', '--tracking-domain', 't.cli.example']);
  assert.equal(on.code, 0, on.stderr);
  const d = JSON.parse(on.stdout);
  assert.deepEqual([d.id, d.open_tracking, d.click_tracking, d.tracking_domain], [id, true, true, 't.cli.example']);
  const [row] = await ctx.sql`select open_tracking, click_tracking, tracking_domain from domains where id = ${id} and project_id = ${t.projectId}`;
  assert.deepEqual({ ...row }, { openTracking: true, clickTracking: true, trackingDomain: 't.cli.example' });
});

test('a templated send is tracked as rendered: its from (the template\'s) picks the domain and its base', async () => {
  const t = await ctx.tenant();
  const id = await domainFor(t.projectId, 'shop.example');
  // Another test's project set it first: no two projects share a tracking domain (§18.11).
  await ctx.sql`update domains set tracking_domain = null where tracking_domain = 'track.shop.example'`;
  assert.equal((await patch(t.key, id, { tracking_domain: 'track.shop.example' })).status, 200);
  const made = await ctx.call(t.key, '/v1/templates', { method: 'POST', body: {
    name: 'Sale', alias: 'sale', from: 'Shop <news@shop.example>', subject: 'Sale for {{name}}',
    html: '<p>Hi {{name}}, <a href="https://shop.example/sale">see the sale</a></p>', text: 'Hi {{name}}', variables: [{ key: 'name', type: 'string' }],
  } });
  assert.equal(made.status, 201, await made.clone().text());
  const { id: templateId } = (await made.json()) as { id: string };
  assert.equal((await ctx.call(t.key, `/v1/templates/${templateId}/publish`, { method: 'POST' })).status, 200);
  const res = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { to: 'ann@example.net', template: { id: 'sale', variables: { name: 'Ann' } }, track_clicks: true } });
  assert.equal(res.status, 201, await res.clone().text());
  const { id: emailId } = (await res.json()) as { id: string };
  assert.equal((await settled(ctx.sql, t.projectId, emailId)).status, 'sent');
  const [caught] = await ctx.sql<[{ html: string }]>`select html from sink_messages where project_id = ${t.projectId} and email_id = ${emailId}`;
  assert.match(caught.html, /^<p>Hi Ann, <a href="https:\/\/track\.shop\.example\/t\/c\/[\w-]{62}">see the sale<\/a><\/p>/);

  // Without a tracking domain for the template's sender, the same send is refused (this instance has no PUBLIC_BASE_URL).
  assert.equal((await patch(t.key, id, { tracking_domain: null })).status, 200);
  const refused = await ctx.call(t.key, '/v1/emails', { method: 'POST', body: { to: 'ann@example.net', template: { id: 'sale', variables: { name: 'Ann' } }, track_clicks: true } });
  assert.equal(refused.status, 422);
  assert.deepEqual(((await refused.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc, ['body', 'track_clicks']);
});
