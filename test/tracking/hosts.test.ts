import { test } from 'node:test';
import { createHmac } from 'node:crypto';
import { deriveKey } from '../../src/platform/crypto.ts';
import assert from 'node:assert/strict';
import { createTestContext, TEST_SECRET_KEY } from '../helpers/app.ts';
import { runCli } from '../helpers/process.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { settled } from '../sending/fixtures.ts';
import { newId } from '../../src/platform/ids.ts';

// §18.11: tracking links answer only where they were issued.
const BASE = 'https://mail.example.test';
const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: BASE } });
await startTestWorker(ctx.config, ctx.sql);

async function domainFor(projectId: string, value: string) {
  const id = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status, dkim_status)
    values (${id}, ${projectId}, ${value}, 'us-east-1', 'success', 'success')`;
  return id;
}
const patch = (key: string, id: string, body: unknown) => ctx.call(key, `/v1/domains/${id}`, { method: 'PATCH', body });

async function tokensOf(key: string, projectId: string, from: string) {
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    body: { from, to: 'ann@example.net', subject: 's', html: '<p><a href="https://shop.example/a">a</a></p>', track_clicks: true, track_opens: true },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = (await res.json()) as { id: string };
  assert.equal((await settled(ctx.sql, projectId, id)).status, 'sent');
  const [row] = await ctx.sql<[{ html: string }]>`select html from sink_messages where project_id = ${projectId} and email_id = ${id}`;
  const click = /href="(https:\/\/[^/"]+)\/t\/c\/([A-Za-z0-9_-]+)"/.exec(row.html)!;
  const open = /src="https:\/\/[^/"]+\/t\/o\/([A-Za-z0-9_-]+)"/.exec(row.html)!;
  return { base: click[1]!, click: click[2]!, open: open[1]! };
}

test('an open or click token answers on the host it was made for, and 404 on any other', async () => {
  const t = await ctx.tenant('hosts');
  const shop = await domainFor(t.projectId, 'shop.example');
  await domainFor(t.projectId, 'plain.example');
  assert.equal((await patch(t.key, shop, { tracking_domain: 'track.shop.example' })).status, 200);

  const viaDomain = await tokensOf(t.key, t.projectId, 'news@shop.example');
  assert.equal(viaDomain.base, 'https://track.shop.example');
  const viaBase = await tokensOf(t.key, t.projectId, 'news@plain.example');
  assert.equal(viaBase.base, BASE);

  for (const [tokens, own, others] of [
    [viaDomain, 'https://track.shop.example', [BASE, 'https://evil.example', 'https://track.shop.example.evil.example']],
    [viaBase, BASE, ['https://track.shop.example', 'https://evil.example']],
  ] as const) {
    const click = await ctx.app.request(`${own}/t/c/${tokens.click}`);
    assert.equal(click.status, 302, own);
    assert.equal(click.headers.get('location'), 'https://shop.example/a');
    assert.equal((await ctx.app.request(`${own}/t/o/${tokens.open}`)).status, 200);
    for (const other of others) {
      assert.equal((await ctx.app.request(`${other}/t/c/${tokens.click}`)).status, 404, `click on ${other}`);
      assert.equal((await ctx.app.request(`${other}/t/o/${tokens.open}`)).status, 404, `open on ${other}`);
      // The Host header decides, as a proxy forwards it.
      assert.equal((await ctx.app.request(`${own}/t/c/${tokens.click}`, { headers: { host: new URL(other).host } })).status, 404);
    }
  }
});

test('a tracking_domain must be a subdomain of one of the project\'s own domains, and no two projects share one', async () => {
  const a = await ctx.tenant('owner of shop');
  const b = await ctx.tenant('another project');
  const aShop = await domainFor(a.projectId, 'acme-shop.example');
  await domainFor(a.projectId, 'acme-news.example');
  const bShop = await domainFor(b.projectId, 'other-shop.example');

  for (const host of ['track.evil.example', 'acme-shop.example', 'xacme-shop.example', 'track.other-shop.example']) {
    const res = await patch(a.key, aShop, { tracking_domain: host });
    assert.equal(res.status, 422, host);
    assert.match(await res.text(), /"loc":\["body","tracking_domain"\]/, host);
  }
  // A subdomain of any of the project's domains (not only the one it is set on).
  assert.equal((await patch(a.key, aShop, { tracking_domain: 'T.Acme-News.Example' })).status, 200);
  // Another project's domain list may not claim it, whatever its own domains.
  await domainFor(b.projectId, 'acme-news.example');
  const taken = await patch(b.key, bShop, { tracking_domain: 't.acme-news.example' });
  assert.equal(taken.status, 422, await taken.clone().text());
  const [row] = await ctx.sql`select tracking_domain from domains where id = ${bShop}`;
  assert.equal(row!.trackingDomain, null, 'nothing changed');
});

/** A token as links sent before tokens named their host carried it: the MAC over the kind and the body alone. */
function hostlessToken(token: string, kind: 'click' | 'open') {
  const body = Buffer.from(token, 'base64url').subarray(0, 34);
  const mac = createHmac('sha256', deriveKey(ctx.config.secretKey, 'tracking-tokens')).update(kind).update(body).digest().subarray(0, 12);
  return Buffer.concat([body, mac]).toString('base64url');
}

test('a link sent before tokens named their host still answers on its project\'s tracking hosts, and 404 elsewhere', async () => {
  const t = await ctx.tenant('old links');
  const other = await ctx.tenant('old links, other project');
  const shop = await domainFor(t.projectId, 'oldlinks.example');
  assert.equal((await patch(t.key, shop, { tracking_domain: 'track.oldlinks.example' })).status, 200);
  const otherShop = await domainFor(other.projectId, 'otherlinks.example');
  assert.equal((await patch(other.key, otherShop, { tracking_domain: 'track.otherlinks.example' })).status, 200);

  const tokens = await tokensOf(t.key, t.projectId, 'news@oldlinks.example');
  const click = hostlessToken(tokens.click, 'click');
  const open = hostlessToken(tokens.open, 'open');
  assert.notEqual(click, tokens.click);
  for (const own of ['https://track.oldlinks.example', BASE]) {
    const res = await ctx.app.request(`${own}/t/c/${click}`);
    assert.equal(res.status, 302, own);
    assert.equal(res.headers.get('location'), 'https://shop.example/a');
    assert.equal((await ctx.app.request(`${own}/t/o/${open}`)).status, 200, own);
  }
  for (const elsewhere of ['https://evil.example', 'https://track.otherlinks.example']) {
    assert.equal((await ctx.app.request(`${elsewhere}/t/c/${click}`)).status, 404, elsewhere);
    assert.equal((await ctx.app.request(`${elsewhere}/t/o/${open}`)).status, 404, elsewhere);
  }
  // A click token is still no open token.
  assert.equal((await ctx.app.request(`${BASE}/t/o/${click}`)).status, 404);
});

test('a tracking_domain is accepted only under a domain of the project that is verified: 422 naming it otherwise, from the API and the CLI', async () => {
  const t = await ctx.tenant('unverified');
  const pending = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values (${pending}, ${t.projectId}, 'pending-shop.example', 'us-east-1', 'pending')`;
  const failed = newId('domain');
  await ctx.sql`insert into domains (id, project_id, value, region, verification_status) values (${failed}, ${t.projectId}, 'failed-shop.example', 'us-east-1', 'failed')`;

  for (const [id, host, parent, status] of [[pending, 'track.pending-shop.example', 'pending-shop.example', 'pending'], [failed, 'track.failed-shop.example', 'failed-shop.example', 'failed']] as const) {
    const res = await patch(t.key, id, { tracking_domain: host });
    assert.equal(res.status, 422, host);
    const body = (await res.json()) as { detail: { loc: string[]; msg: string }[] };
    assert.deepEqual(body.detail[0]!.loc, ['body', 'tracking_domain']);
    assert.match(body.detail[0]!.msg, new RegExp(`${host.replaceAll('.', '\\.')}.*${parent.replaceAll('.', '\\.')} is ${status}`));
    const cli = await runCli(['domain', 'update', id, '--tracking-domain', host], { DATABASE_URL: ctx.url, SECRET_KEY: TEST_SECRET_KEY, LOG_LEVEL: 'silent' });
    assert.equal(cli.code, 1, host);
    assert.match(cli.stderr, new RegExp(`^mailroom: tracking domain ${host.replaceAll('.', '\\.')} must be under a verified domain`));
  }
  const [row] = await ctx.sql`select count(*)::int as n from domains where project_id = ${t.projectId} and tracking_domain is not null`;
  assert.equal(row!.n, 0, 'nothing changed');

  // Once the domain is verified, the same host is accepted.
  await ctx.sql`update domains set verification_status = 'success' where id = ${pending} and project_id = ${t.projectId}`;
  assert.equal((await patch(t.key, pending, { tracking_domain: 'track.pending-shop.example' })).status, 200);
});
