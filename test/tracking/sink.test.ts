import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { selfSignedCertificate, startHttpsReceiver } from '../helpers/https-receiver.ts';
import { waitFor } from '../helpers/wait.ts';
import { settled } from '../sending/fixtures.ts';
import { fakeDns, webhookWorker } from '../webhooks/helpers.ts';
import { createEndpoint } from '../../src/webhooks/service.ts';
import { RECORDED_HITS_PER_EMAIL, recordHitsStatement, type TrackingHit } from '../../src/tracking/queries.ts';
import { newId } from '../../src/platform/ids.ts';

// A sink project trying tracking locally with the per-email switches (§15.1), end to end: the
// worker rewrites at send time, the sink catches the message over SMTP, the routes answer and
// record, and the events reach the timeline, the webhooks (with filters), /resend and metrics.
const BASE = 'https://mail.example.test';
const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: BASE, WEBHOOK_ALLOWED_CIDRS: '127.0.0.0/8' } });
const tls = selfSignedCertificate();
const receiver = await startHttpsReceiver(tls);
const dns = fakeDns({ 'hooks.test': ['127.0.0.1'] });
await webhookWorker().start(ctx.config, ctx.sql, { ca: tls.cert, resolve: dns.resolve, timeoutMs: 2000 });
const { projectId, key } = await ctx.tenant('sink tracking');

const every = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/every', 'hooks.test'), { resolve: dns.resolve });
const clicksOnly = await createEndpoint(ctx.sql, ctx.config, projectId, receiver.url('/clicks', 'hooks.test'), { resolve: dns.resolve, eventTypes: ['email.clicked'] });

const HTML = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Receipt</title>
<style>a { color: #123 } /* <a href="https://not-a-link.example/"> */</style></head>
<body>
<!-- a comment with <a href="https://commented.example/"> -->
<p>Hello   <b>Ann</b> &amp; co,&nbsp;your <A class='btn'  HREF = 'https://shop.example/orders/42?x=1&amp;y=2#top' >order</A> is on its way.</p>
<p><a href="mailto:help@shop.example">Write to us</a> · <a href="tel:+123">call</a> · <a href="/relative">relative</a> · <a name="anchor">no href</a></p>
<p><a href="http://shop.example/plain">plain http</a> and <a href="https://shop.example/orders/42?x=1&amp;y=2#top">the same URL again</a></p>
<p><a href="${BASE}/unsubscribe/sometoken">Unsubscribe</a></p>
<table><tr><td><a href="https://shop.example/ünïcode path">non-ASCII</a></td></tr></table>
<script type="text/template"><a href="https://inside-script.example/"></script>
</body>
</html>
`;
const ORIGINAL_URLS = ['https://shop.example/orders/42?x=1&y=2#top', 'http://shop.example/plain', 'https://shop.example/orders/42?x=1&y=2#top', 'https://shop.example/%C3%BCn%C3%AFcode%20path'];

async function send(body: Record<string, unknown>) {
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    body: { from: 'Shop <shop@shop.example>', to: 'ann@example.net', cc: 'carl@example.net', subject: 'Receipt', html: HTML, text: 'Your order https://shop.example/orders/42 is on its way.', ...body },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const { id } = (await res.json()) as { id: string };
  const state = await settled(ctx.sql, projectId, id);
  assert.equal(state.status, 'sent', state.lastError ?? '');
  const [caught] = await ctx.sql<[{ html: string; text: string; raw: Buffer }]>`
    select html, text, raw from sink_messages where project_id = ${projectId} and email_id = ${id}`;
  return { id, caught };
}

const trackedHref = new RegExp(`href="${BASE.replaceAll('.', '\\.')}/t/c/([A-Za-z0-9_-]+)"`, 'g');
const pixel = new RegExp(`<img src="${BASE.replaceAll('.', '\\.')}/t/o/([A-Za-z0-9_-]+)" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0">`);
let tracked: { id: string; clickTokens: string[]; openToken: string };

test('a send with track_opens and track_clicks: the caught HTML has every http(s) link rewritten and the pixel, and nothing else changed', async () => {
  const { id, caught } = await send({ track_opens: true, track_clicks: true });
  const clickTokens = [...caught.html.matchAll(trackedHref)].map((m) => m[1]!);
  assert.equal(clickTokens.length, 4, caught.html);
  assert.equal(new Set(clickTokens).size, 4, 'each link position has its own token');
  const openToken = pixel.exec(caught.html)?.[1];
  assert.ok(openToken, 'the pixel is in the HTML');
  assert.ok(caught.html.indexOf(pixel.exec(caught.html)![0]) === caught.html.indexOf('</body>') - pixel.exec(caught.html)![0].length, 'the pixel is the last thing in the body');

  // Put the original attributes back and take the pixel out: the rest is the HTML as sent, byte for byte.
  const originalAttrs = [`HREF = 'https://shop.example/orders/42?x=1&amp;y=2#top'`, 'href="http://shop.example/plain"', 'href="https://shop.example/orders/42?x=1&amp;y=2#top"', 'href="https://shop.example/ünïcode path"'];
  let i = 0;
  const restored = caught.html.replace(trackedHref, () => originalAttrs[i++]!).replace(pixel, '');
  assert.equal(restored, HTML);
  assert.match(caught.html, /href="mailto:help@shop\.example"/);
  assert.match(caught.html, new RegExp(`href="${BASE}/unsubscribe/sometoken"`), 'the unsubscribe link is left alone');
  assert.match(caught.text, /Your order https:\/\/shop\.example\/orders\/42 is on its way\./, 'the text part is untouched');

  // The stored email keeps the original HTML; the links' URLs are stored beside it.
  const read = (await (await ctx.call(key, `/v1/emails/${id}`)).json()) as Record<string, unknown>;
  assert.equal(read.html, HTML);
  assert.equal(read.opened_at, null);
  assert.equal(read.clicked_at, null);
  const [row] = await ctx.sql<[{ trackedLinks: string[] }]>`select tracked_links from emails where id = ${id} and project_id = ${projectId}`;
  assert.deepEqual(row.trackedLinks, ORIGINAL_URLS);
  tracked = { id, clickTokens, openToken };
});

test('off by default, and a send may switch one of the two alone', async () => {
  const plain = await send({});
  assert.equal(plain.caught.html, HTML, 'no switch: the HTML goes as written');
  const opensOnly = await send({ track_opens: true });
  assert.equal(opensOnly.caught.html.replace(pixel, ''), HTML);
  assert.match(opensOnly.caught.html, pixel);
  // One recipient, so the message carries List-Unsubscribe: tracking leaves the header alone.
  const clicksOnly = await send({ track_clicks: true, track_opens: false, cc: undefined });
  assert.doesNotMatch(clicksOnly.caught.html, pixel);
  assert.equal([...clicksOnly.caught.html.matchAll(trackedHref)].length, 4);
  assert.match(clicksOnly.caught.raw.toString(), /^List-Unsubscribe:\s+<https:\/\/mail\.example\.test\/unsubscribe\/[^>]+>\r$/m, 'the List-Unsubscribe header is untouched');
});

test('GET /t/c/<token> answers 302 to the stored URL; GET /t/o/<token> a 43-byte GIF, not cached; HEAD records nothing', async () => {
  const head = await ctx.app.request(`${BASE}/t/c/${tracked.clickTokens[1]}`, { method: 'HEAD' });
  assert.equal(head.status, 302);
  const headOpen = await ctx.app.request(`${BASE}/t/o/${tracked.openToken}`, { method: 'HEAD' });
  assert.equal(headOpen.status, 200);

  const open = await ctx.app.request(`${BASE}/t/o/${tracked.openToken}`, { headers: { 'user-agent': 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)' } });
  assert.equal(open.status, 200);
  assert.equal(open.headers.get('content-type'), 'image/gif');
  assert.equal(open.headers.get('cache-control'), 'no-store');
  const gif = Buffer.from(await open.arrayBuffer());
  assert.equal(gif.length, 43);
  assert.equal(gif.subarray(0, 6).toString(), 'GIF89a');

  const agent = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15';
  for (const [i, url] of ORIGINAL_URLS.entries()) {
    const click = await ctx.app.request(`${BASE}/t/c/${tracked.clickTokens[i]}`, { headers: { 'user-agent': agent, 'x-forwarded-for': '203.0.113.9' } });
    assert.equal(click.status, 302);
    assert.equal(click.headers.get('location'), url);
    assert.equal(click.headers.get('cache-control'), 'no-store');
  }

  const events = await waitFor('the open and the four clicks', async () => {
    const rows = await ctx.sql<{ type: string; data: Record<string, unknown> }[]>`
      select type, data from events where project_id = ${projectId} and email_id = ${tracked.id} and type in ('email.opened', 'email.clicked') order by id`;
    return rows.length >= 5 && rows;
  });
  await new Promise((r) => setTimeout(r, 200));
  const all = await ctx.sql<{ type: string }[]>`
    select type from events where project_id = ${projectId} and email_id = ${tracked.id} and type in ('email.opened', 'email.clicked')`;
  assert.equal(all.length, 5, 'the HEAD requests recorded nothing');
  assert.deepEqual(events[0], { type: 'email.opened', data: { to: ['ann@example.net', 'carl@example.net'], user_agent: 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)', machine: true, tags: [] } });
  assert.deepEqual(events.slice(1).map((e) => e.data.link), ORIGINAL_URLS);
  assert.deepEqual(events[1], { type: 'email.clicked', data: { to: ['ann@example.net', 'carl@example.net'], link: ORIGINAL_URLS[0], user_agent: agent, machine: false, tags: [] } });
  assert.doesNotMatch(JSON.stringify(events), /203\.0\.113\.9/, 'no client address is stored');

  const read = (await (await ctx.call(key, `/v1/emails/${tracked.id}`)).json()) as Record<string, string>;
  assert.ok(read.opened_at && read.clicked_at);
  assert.ok(read.opened_at <= read.clicked_at);
  const resend = (await (await ctx.call(key, `/resend/emails/${tracked.id}`)).json()) as Record<string, string>;
  assert.equal(resend.last_event, 'clicked');

  const metrics = await (await ctx.app.request('/metrics')).text();
  assert.match(metrics, /^mailroom_tracking_events_total\{type="email\.clicked"\} [1-9]/m);
  assert.match(metrics, /^mailroom_tracking_events_total\{type="email\.opened"\} [1-9]/m);
});

test('the first open and click stay the email\'s opened_at and clicked_at', async () => {
  const [before] = await ctx.sql<[{ openedAt: Date; clickedAt: Date }]>`select opened_at, clicked_at from emails where id = ${tracked.id} and project_id = ${projectId}`;
  await ctx.app.request(`${BASE}/t/o/${tracked.openToken}`);
  await ctx.app.request(`${BASE}/t/c/${tracked.clickTokens[0]}`);
  await waitFor('the second open', async () => {
    const [r] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from events where email_id = ${tracked.id} and project_id = ${projectId} and type = 'email.opened'`;
    return r.n >= 2;
  });
  const [after] = await ctx.sql<[{ openedAt: Date; clickedAt: Date }]>`select opened_at, clicked_at from emails where id = ${tracked.id} and project_id = ${projectId}`;
  assert.deepEqual(after, before);
});

test('opened_at and clicked_at are the times the requests came in, whichever batch commits first', async () => {
  const { id } = await send({ track_opens: true, track_clicks: true });
  const openedAt = '2026-01-01T10:00:00.000Z';
  const clickedAt = '2026-01-01T10:00:01.000Z';
  const hit = (type: TrackingHit['type'], at: string): TrackingHit => ({ id: newId('event'), projectId, emailId: id, type, at, data: { user_agent: 'x', machine: false, ...(type === 'email.clicked' ? { link: ORIGINAL_URLS[1] } : {}) } });
  // The click's batch commits before the open's, as concurrent batches may.
  await recordHitsStatement(ctx.sql, [hit('email.clicked', clickedAt)]);
  await recordHitsStatement(ctx.sql, [hit('email.opened', openedAt)]);
  const [row] = await ctx.sql<[{ openedAt: Date; clickedAt: Date }]>`select opened_at, clicked_at from emails where id = ${id} and project_id = ${projectId}`;
  assert.deepEqual([row.openedAt.toISOString(), row.clickedAt.toISOString()], [openedAt, clickedAt]);
});

test('an email records at most 100 opens: past them the pixel still answers, and records nothing', async () => {
  const { id, caught } = await send({ track_opens: true });
  const token = pixel.exec(caught.html)![1]!;
  const open = (): TrackingHit => ({ id: newId('event'), projectId, emailId: id, type: 'email.opened', at: new Date().toISOString(), data: { user_agent: 'x', machine: false } });
  const opens = async () => (await ctx.sql<[{ n: number }]>`
    select count(*)::int as n from events where email_id = ${id} and project_id = ${projectId} and type = 'email.opened'`)[0].n;

  await recordHitsStatement(ctx.sql, Array.from({ length: 98 }, open));
  const [row] = await recordHitsStatement(ctx.sql, Array.from({ length: 5 }, open));
  assert.deepEqual(row!.types, ['email.opened', 'email.opened'], 'two of a batch of five fit under 100');
  assert.equal(await opens(), RECORDED_HITS_PER_EMAIL);

  const unrecorded = async () => Number((await (await ctx.app.request('/metrics')).text()).match(/^mailroom_tracking_hits_unrecorded_total (\d+)/m)?.[1] ?? 0);
  const before = await unrecorded();
  const res = await ctx.app.request(`${BASE}/t/o/${token}`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'image/gif');
  await waitFor('the hit counted as unrecorded', async () => (await unrecorded()) > before);
  assert.equal(await opens(), RECORDED_HITS_PER_EMAIL);
});

test('a burst of opens is recorded through the group commit: many opens share a transaction', async () => {
  const { id, caught } = await send({ track_opens: true });
  const token = pixel.exec(caught.html)![1]!;
  const answers = await Promise.all(Array.from({ length: 60 }, () => ctx.app.request(`${BASE}/t/o/${token}`)));
  assert.ok(answers.every((r) => r.status === 200));
  const rows = await waitFor('the 60 opens', async () => {
    const r = await ctx.sql<{ tx: string }[]>`select xmin::text as tx from events where email_id = ${id} and project_id = ${projectId} and type = 'email.opened'`;
    return r.length === 60 && r;
  });
  const transactions = new Set(rows.map((r) => r.tx)).size;
  assert.ok(transactions <= 10, `60 opens in ${transactions} transactions`);
});

test('webhooks: every type to the endpoint without a filter, only clicks to the one filtered on email.clicked', async () => {
  const typesAt = (path: string) => receiver.requests.filter((r) => r.path === path && JSON.parse(r.body.toString()).email_id === tracked.id)
    .map((r) => String(r.headers['x-webhook-event-type']));
  await waitFor('the deliveries', () => typesAt('/every').filter((t) => t === 'email.clicked').length >= 4 && typesAt('/every').includes('email.opened'));
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(new Set(typesAt('/every')), new Set(['email.sent', 'email.delivered', 'email.opened', 'email.clicked']));
  assert.ok(typesAt('/clicks').length >= 4);
  assert.deepEqual(new Set(typesAt('/clicks')), new Set(['email.clicked']));
  const bodies = receiver.requests.filter((r) => r.path === '/clicks').map((r) => JSON.parse(r.body.toString()));
  assert.ok(bodies.every((b) => b.type === 'email.clicked'));
  assert.deepEqual(new Set(bodies.map((b) => b.data.link)), new Set(ORIGINAL_URLS), 'each click carries its link');

  const listed = (await (await ctx.call(key, '/v1/webhooks')).json()) as { data: { id: string; event_types: string[] | null }[] };
  assert.deepEqual(listed.data.find((e) => e.id === clicksOnly.endpoint.id)?.event_types, ['email.clicked']);
  assert.equal(listed.data.find((e) => e.id === every.endpoint.id)?.event_types, null);
});

test('tokens that do not verify answer 404, fast, never 5xx, and record nothing', async () => {
  const good = tracked.clickTokens[0]!;
  assert.equal((await ctx.app.request(`${BASE}/t/c/${good}`, { method: 'HEAD' })).status, 302, 'the genuine token answers');
  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
  const bad = [
    flip(good, 0), flip(good, 30), flip(good, good.length - 1), flip(good, good.length - 5),
    good.slice(0, -1), good.slice(1), `${good}A`, good.slice(0, 10), '', 'x',
    'A'.repeat(8000), encodeURIComponent('é'.repeat(62)), encodeURIComponent('ü') + good.slice(1),
    '%ZZ', '..%2F..%2Fetc%2Fpasswd', tracked.openToken, `${good.slice(0, -2)}==`,
  ];
  const [{ n: before }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from events where project_id = ${projectId}`;
  const took: number[] = [];
  for (const token of bad) {
    for (const route of ['c', 'o']) {
      if (route === 'o' && token === tracked.openToken) continue;
      const started = performance.now();
      const res = await ctx.app.request(`${BASE}/t/${route}/${token}`);
      took.push(performance.now() - started);
      assert.ok(res.status === 404, `${route} ${token.slice(0, 40)}: ${res.status}`);
      assert.equal(res.headers.get('location'), null);
    }
  }
  // Refused before any query: fast even on a busy machine.
  took.sort((a, b) => a - b);
  assert.ok(took[Math.floor(took.length / 2)]! < 10 && took.at(-1)! < 250, `median ${took[Math.floor(took.length / 2)]!.toFixed(1)} ms, max ${took.at(-1)!.toFixed(1)} ms`);
  await new Promise((r) => setTimeout(r, 200));
  const [{ n: after }] = await ctx.sql<[{ n: number }]>`select count(*)::int as n from events where project_id = ${projectId}`;
  assert.equal(after, before);
});

test('a genuine token for a position the email has no link at, or for an email of another project, is 404', async () => {
  const { signTrackingToken } = await import('../../src/tracking/token.ts');
  const past = signTrackingToken(ctx.config.secretKey, 'click', { projectId, emailId: tracked.id, link: 4 }, new URL(BASE).host);
  assert.equal((await ctx.app.request(`${BASE}/t/c/${past}`)).status, 404);
  const other = await ctx.tenant('other');
  const wrongProject = signTrackingToken(ctx.config.secretKey, 'click', { projectId: other.projectId, emailId: tracked.id, link: 0 }, new URL(BASE).host);
  assert.equal((await ctx.app.request(`${BASE}/t/c/${wrongProject}`)).status, 404);
});

test('without PUBLIC_BASE_URL or a tracking domain, a send switching tracking on is refused with 422', async () => {
  const bare = await createTestContext();
  const t = await bare.tenant();
  const res = await bare.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'a@shop.example', to: 'b@example.net', subject: 's', html: '<p>x</p>', track_clicks: true } });
  assert.equal(res.status, 422);
  const body = (await res.json()) as { detail: { loc: unknown[]; type: string }[] };
  assert.deepEqual(body.detail.map((d) => [d.loc, d.type]), [[['body', 'track_clicks'], 'tracking_unavailable']]);
  const batch = await bare.call(t.key, '/v1/emails/batch', { method: 'POST', body: [{ from: 'a@shop.example', to: 'b@example.net', subject: 's', html: '<p>x</p>' }, { from: 'a@shop.example', to: 'b@example.net', subject: 's', html: '<p>x</p>', track_opens: true }] });
  assert.equal(batch.status, 422);
  assert.deepEqual(((await batch.json()) as { detail: { loc: unknown[] }[] }).detail[0]!.loc, ['body', 1, 'track_opens']);
  const [{ n }] = await bare.sql<[{ n: number }]>`select count(*)::int as n from emails where project_id = ${t.projectId}`;
  assert.equal(n, 0, 'nothing was written');
  const off = await bare.call(t.key, '/v1/emails', { method: 'POST', body: { from: 'a@shop.example', to: 'b@example.net', subject: 's', html: '<p>x</p>', track_clicks: false } });
  assert.equal(off.status, 201, 'switching off needs no base');
});
