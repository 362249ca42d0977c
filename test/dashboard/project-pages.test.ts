import { test } from 'node:test';
import assert from 'node:assert/strict';
import { recordEvent, type EventType } from '../../src/events/record.ts';
import { insertSinkMessage } from '../../src/sink/store.ts';
import { rebuildStats } from '../../src/stats/rebuild.ts';
import { signedInWithTwoProjects } from './client.ts';

const { ctx, b, a, other, P, Q } = await signedInWithTwoProjects();

async function send(key: string, body: Record<string, unknown> = {}) {
  const res = await ctx.call(key, '/v1/emails', {
    method: 'POST',
    body: { from: 'app@example.com', to: 'ann@example.net', subject: 'Hello', text: 'Hi', ...body },
  });
  assert.equal(res.status, 201, await res.clone().text());
  return ((await res.json()) as { id: string }).id;
}

/**
 * Records an event as the worker would, optionally dated `daysAgo` days back by hand; rows changed
 * by hand reach the daily counters through `stats rebuild`, as an operator's would.
 */
async function event(projectId: string, emailId: string, type: EventType, daysAgo = 0) {
  const id = await ctx.sql.begin((tx) => recordEvent(tx, { projectId, emailId, type, data: { email_id: emailId, note: `${type} note` } }));
  if (daysAgo) {
    await ctx.sql`update events set created_at = now() - make_interval(days => ${daysAgo}) where id = ${id!}`;
    await rebuildStats(ctx.sql);
  }
  return id!;
}

const catchMessage = (projectId: string, subject: string, extra: { emailId?: string; to?: string } = {}) =>
  insertSinkMessage(ctx.sql, {
    projectId, emailId: extra.emailId ?? null, raw: Buffer.from(`Subject: ${subject}\r\n\r\nbody\r\n`),
    fromAddress: 'app@example.com', toAddresses: [extra.to ?? 'ann@example.net'], ccAddresses: [], subject,
    text: 'body', html: null, headers: {}, attachments: [],
  } as never, { messages: 1000, bytes: 1e9 });

test('every project page links to the others, and the project list opens the overview', async () => {
  const home = await b.get('/dashboard');
  assert.match(home.text, new RegExp(`href="${P}"`));
  for (const path of ['', '/emails', '/inbox', '/templates', '/suppressions', '/webhooks', '/domains', '/keys']) {
    const page = await b.get(`${P}${path}`);
    assert.equal(page.res.status, 200, path);
    for (const link of ['', '/emails', '/inbox', '/templates', '/suppressions', '/webhooks', '/domains', '/keys']) {
      assert.ok(page.text.includes(`href="${P}${link}"`), `${path || '/'} links to ${link || 'the overview'}`);
    }
  }
});

test('overview: a 14-day SVG chart drawn on the server from the events, the totals, in-flight counts and the sink note', async () => {
  const project = await ctx.tenant('chart');
  const O = `/dashboard/projects/${project.projectId}`;
  const first = await send(project.key);
  const second = await send(project.key, { scheduled_at: new Date(Date.now() + 3_600_000).toISOString() });
  assert.ok(second);
  await event(project.projectId, first, 'email.sent', 3);
  await event(project.projectId, first, 'email.delivered', 3);
  await event(project.projectId, first, 'email.sent');
  await event(project.projectId, first, 'email.bounced');
  await event(project.projectId, first, 'email.sent', 20); // outside the window

  const page = await b.get(O);
  assert.equal(page.res.status, 200);
  assert.doesNotMatch(page.text, /<script/i, 'the chart needs no script');
  const svg = /<svg[^]*?<\/svg>/.exec(page.text)?.[0] ?? '';
  assert.match(svg, /class="chart"/);
  const series = [...svg.matchAll(/data-series="(\w+)"/g)].map((m) => m[1]);
  assert.deepEqual(series, ['sent', 'delivered', 'bounced', 'complained', 'failed', 'opened', 'clicked']);
  const sentBars = /data-series="sent"[^>]*>([^]*?)<\/g>/.exec(svg)![1]!.match(/<rect/g)!;
  assert.equal(sentBars.length, 14, 'one bar per day');
  const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
  assert.match(svg, new RegExp(`<title>${day(3)}: 1 sent</title>`));
  assert.match(svg, new RegExp(`<title>${day(0)}: 1 bounced</title>`));
  assert.match(svg, new RegExp(`<title>${day(13)}: 0 sent</title>`));
  assert.doesNotMatch(svg, new RegExp(day(20)));
  const totals = /id="totals">([^]*?)<\/div>\s*<svg/.exec(page.text)![1]!;
  assert.match(totals, /data-series="sent"><b>2<\/b>/);
  assert.match(totals, /data-series="delivered"><b>1<\/b>/);
  assert.match(totals, /<b>50.0%<\/b>bounce rate/);
  assert.match(page.text, /id="in-flight">[^]*<b>1<\/b>scheduled[^]*<b>1<\/b>queued/);
  assert.match(page.text, /No provider is connected/);
});

test('overview: a connected SES account shows its pace and quota', async () => {
  const project = await ctx.tenant('ses');
  await ctx.sql`
    with account as (
      insert into ses_accounts (region, access_key_digest, max_send_rate, max_24_hour_send, quota_checked_at)
      values ('eu-west-1', sha256('AKIA-pages'::bytea), 14, 50000, now()) returning id
    )
    insert into provider_connections (project_id, provider, region, access_key_id, secret_access_key_encrypted, rate_cap, ses_account_id)
    select ${project.projectId}, 'ses', 'eu-west-1', 'AKIA', '\\x00'::bytea, 10, id from account`;
  const page = await b.get(`/dashboard/projects/${project.projectId}`);
  assert.match(page.text, /Amazon SES, eu-west-1/);
  assert.match(page.text, /<th>Pace<\/th><td>10\/s<\/td>/);
  assert.match(page.text, /<th>Account send rate<\/th><td>14\/s<\/td>/);
  assert.match(page.text, /0 of 50000/);
});

test('emails: filters by status and tag, pages through everything, and bad filters say why', async () => {
  const project = await ctx.tenant('paging');
  const E = `/dashboard/projects/${project.projectId}/emails`;
  const ids: string[] = [];
  for (let i = 0; i < 53; i++) ids.push(await send(project.key, { subject: `Paged ${i}`, tags: i % 10 === 0 ? [{ name: 'kind', value: 'tenth' }] : [] }));
  await ctx.sql`update emails set status = 'failed', last_error = 'provider_rejected' where id = ${ids[5]!}`;

  const first = await b.get(E);
  const shown = (text: string) => [...text.matchAll(/href="[^"]*\/emails\/(email_\w+)"/g)].map((m) => m[1]);
  assert.equal(shown(first.text).length, 50);
  assert.equal(shown(first.text)[0], ids.at(-1));
  const older = /href="([^"]+)" rel="next"/.exec(first.text)![1]!.replaceAll('&amp;', '&');
  const second = await b.get(older);
  assert.deepEqual(shown(second.text), [ids[2], ids[1], ids[0]]);
  assert.doesNotMatch(second.text, /rel="next"/);
  assert.match(second.text, /Newest/);

  const failed = await b.get(`${E}?status=failed`);
  assert.deepEqual(shown(failed.text), [ids[5]]);
  assert.match(failed.text, /provider_rejected/);
  const tagged = await b.get(`${E}?tag=kind:tenth`);
  assert.deepEqual(shown(tagged.text), [ids[50], ids[40], ids[30], ids[20], ids[10], ids[0]]);
  assert.match(tagged.text, /kind:tenth/);

  const badTag = await b.get(`${E}?tag=has space`);
  assert.equal(badTag.res.status, 422);
  assert.match(badTag.text, /A tag filter is name:value/);
  const badStatus = await b.get(`${E}?status=<b>lost</b>`);
  assert.equal(badStatus.res.status, 422);
  assert.match(badStatus.text, /There is no status &quot;&lt;b&gt;lost&lt;\/b&gt;&quot;/);
  assert.equal((await b.get(`${E}?after=email_%00`)).res.status, 404);
});

test('email page: fields, timeline, webhook deliveries and the caught copy; another project gets 404', async () => {
  await b.get(`${P}/webhooks`);
  const made = await b.post(`${P}/webhooks`, { url: 'http://127.0.0.1:9/timeline-hook' });
  const endpointId = made.res.headers.get('location')!.split('/').at(-1)!;
  const id = await send(a.key, { subject: 'Timeline <b>me</b>', tags: [{ name: 'flow', value: 'signup' }] });
  await event(a.projectId, id, 'email.sent');
  await event(a.projectId, id, 'email.delivered');
  const caught = await catchMessage(a.projectId, 'Timeline me', { emailId: id });

  const page = await b.get(`${P}/emails/${id}`);
  assert.equal(page.res.status, 200);
  assert.match(page.text, /<title>Timeline &lt;b&gt;me&lt;\/b&gt; · Mailroom/);
  assert.match(page.text, /id="email-status"[^>]*>queued</);
  assert.match(page.text, /flow:signup/);
  const timeline = /id="timeline">([^]*?)<\/table>/.exec(page.text)![1]!;
  assert.deepEqual([...timeline.matchAll(/<td>(email\.\w+)<\/td>/g)].map((m) => m[1]), ['email.sent', 'email.delivered']);
  assert.match(timeline, /email.sent note/);
  const deliveries = /id="email-deliveries">([^]*?)<\/table>/.exec(page.text)![1]!;
  assert.equal([...deliveries.matchAll(/timeline-hook/g)].length, 2);
  assert.match(deliveries, new RegExp(`href="${P}/webhooks/${endpointId}/deliveries"`));
  assert.match(deliveries, /pending/);
  assert.match(page.text, new RegExp(`id="caught-link" href="${P}/inbox/${caught}"`));
  const message = await b.get(`${P}/inbox/${caught}`);
  assert.match(message.text, new RegExp(`href="${P}/emails/${id}"`), 'the caught message links back');

  assert.equal((await b.get(`${Q}/emails/${id}`)).res.status, 404);
  assert.equal((await b.get(`${P}/emails/email_%00`)).res.status, 404);
  assert.equal((await b.get(`${P}/emails/email_01ARZ3NDEKTSV4RRFFQ69G5FAV`)).res.status, 404);
});

test('suppressions: list, add (bad address inline), find, page, lift; isolated by project', async () => {
  const S = `${P}/suppressions`;
  await b.get(S);
  const bad = await b.post(S, { email: 'not an address' });
  assert.equal(bad.res.status, 422);
  assert.match(bad.text, /Enter an email address/);
  assert.match(bad.text, /value="not an address"/);
  const added = await b.post(S, { email: 'Blocked <Blocked@Example.net>' });
  assert.equal(added.res.status, 303);
  const [row] = await ctx.sql`select reason from suppressions where project_id = ${a.projectId} and address = 'blocked@example.net'`;
  assert.equal(row?.reason, 'manual');
  for (let i = 0; i < 51; i++) await ctx.sql`insert into suppressions (project_id, address, reason) values (${a.projectId}, ${`bulk${i}@example.net`}, 'bounced')`;

  const list = await b.get(S);
  const rows = (text: string) => [...text.matchAll(/<tr><td>([^<]+@[^<]+)<\/td>/g)].map((m) => m[1]);
  assert.equal(rows(list.text).length, 50);
  const older = /href="([^"]+)" rel="next"/.exec(list.text)![1]!.replaceAll('&amp;', '&');
  assert.equal(rows((await b.get(older)).text).length, 2);
  const found = await b.get(`${S}?email=BLOCKED@example.net`);
  assert.deepEqual(rows(found.text), ['blocked@example.net']);
  assert.match((await b.get(`${S}?email=nobody@example.net`)).text, /That address is not suppressed/);
  assert.equal((await b.get(`${S}?after=nobody@example.net`)).res.status, 404);

  await b.get(`${Q}/suppressions`);
  assert.equal((await b.post(`${Q}/suppressions/lift`, { email: 'blocked@example.net' })).res.status, 404, 'B cannot lift A\'s entry');
  await b.get(S);
  const lifted = await b.post(`${S}/lift`, { email: 'blocked@example.net' });
  assert.equal(lifted.res.status, 303);
  assert.equal((await ctx.sql`select 1 from suppressions where project_id = ${a.projectId} and address = 'blocked@example.net'`).length, 0);
  await b.get(S);
  assert.equal((await b.post(`${S}/lift`, { email: 'blocked@example.net' })).res.status, 404, 'lifting twice is a 404');
});

test('deliveries: an endpoint\'s deliveries with their events, a redeliver button, 409 once disabled', async () => {
  await b.get(`${P}/webhooks`);
  const made = await b.post(`${P}/webhooks`, { url: 'http://127.0.0.1:9/deliveries-hook' });
  const endpointId = made.res.headers.get('location')!.split('/').at(-1)!;
  const D = `${P}/webhooks/${endpointId}/deliveries`;
  const id = await send(a.key, { subject: 'Redeliver me' });
  await event(a.projectId, id, 'email.sent');
  const [delivery] = await ctx.sql<[{ id: string }]>`select id from webhook_deliveries where endpoint_id = ${endpointId}`;
  await ctx.sql`update webhook_deliveries set status = 'failed', attempt_count = 8, error = 'connection_refused' where id = ${delivery.id}`;

  const page = await b.get(D);
  assert.equal(page.res.status, 200);
  const row = new RegExp(`id="row-${delivery.id}">([^]*?)</tr>`).exec(page.text)![1]!;
  assert.match(row, /email.sent/);
  assert.match(row, new RegExp(`href="${P}/emails/${id}"`));
  assert.match(row, /connection_refused/);
  assert.match(row, /Redeliver/);
  assert.match((await b.get(`${P}/webhooks/${endpointId}`)).text, new RegExp(`href="${D}"`));

  await b.get(D);
  const again = await b.post(`${D}/${delivery.id}/redeliver`);
  assert.equal(again.res.status, 303);
  const location = again.res.headers.get('location')!;
  const [copy] = await ctx.sql<[{ id: string; status: string; redeliveryOf: string }]>`
    select id, status, redelivery_of from webhook_deliveries where endpoint_id = ${endpointId} and id <> ${delivery.id}`;
  assert.equal(copy.redeliveryOf, delivery.id);
  assert.equal(copy.status, 'pending');
  assert.equal(location, `${D}?redelivered=${copy.id}`);
  assert.match((await b.get(location)).text, new RegExp(`queued again as delivery <code>${copy.id}</code>`));

  await b.post(`${P}/webhooks/${endpointId}/disable`);
  const page2 = await b.get(D);
  assert.doesNotMatch(page2.text, />Redeliver</);
  const refused = await b.post(`${D}/${delivery.id}/redeliver`);
  assert.equal(refused.res.status, 409);
  assert.match(refused.text, /disabled/);

  await b.get(`${Q}/webhooks`);
  assert.equal((await b.get(`${Q}/webhooks/${endpointId}/deliveries`)).res.status, 404);
  assert.equal((await b.post(`${Q}/webhooks/${endpointId}/deliveries/${delivery.id}/redeliver`)).res.status, 404);
});

test('inbox: search by subject, sender or recipient, paging, and the live stream only on the unfiltered first page', async () => {
  const project = await ctx.tenant('inbox');
  const I = `/dashboard/projects/${project.projectId}/inbox`;
  for (let i = 0; i < 52; i++) await catchMessage(project.projectId, `Invoice ${i}`, { to: i === 7 ? 'Carol@Example.org' : 'ann@example.net' });
  await catchMessage(project.projectId, 'Password 100% reset_now');

  const first = await b.get(I);
  const rows = (text: string) => [...text.matchAll(/<tr id="row-(msg_\w+)">/g)].map((m) => m[1]);
  assert.equal(rows(first.text).length, 50);
  assert.match(first.text, /<script src="\/dashboard\/assets\/live-inbox.js" defer(="")?><\/script>/);
  assert.match(first.text, new RegExp(`data-live="${I}/live\\?after=${rows(first.text)[0]}"`));
  const older = /href="([^"]+)" rel="next"/.exec(first.text)![1]!.replaceAll('&amp;', '&');
  const second = await b.get(older);
  assert.equal(rows(second.text).length, 3);
  assert.doesNotMatch(second.text, /live-inbox.js|data-live/, 'older pages stay still');

  const search = async (q: string) => rows((await b.get(`${I}?q=${encodeURIComponent(q)}`)).text).length;
  assert.equal(await search('invoice 1'), 11, 'subject, case-insensitive: 1 and 10 to 19');
  assert.equal(await search('carol@example'), 1, 'recipient');
  assert.equal(await search('APP@example.com'), 50, 'sender: all 53 match, a page shows 50');
  assert.equal(await search('100%'), 1, '% is literal');
  assert.equal(await search('reset_now'), 1, '_ is literal');
  assert.equal(await search('0%'), 1);
  assert.equal(await search('nothing like this'), 0);
  assert.doesNotMatch((await b.get(`${I}?q=invoice`)).text, /data-live/);
  assert.equal((await b.get(`${I}?after=msg_%00`)).res.status, 404);

  const script = await ctx.app.request('/dashboard/assets/live-inbox.js');
  assert.equal(script.status, 200);
  assert.match(script.headers.get('content-type')!, /text\/javascript/);
  assert.match(await script.text(), /textContent/);
});

test('live inbox stream: mail caught after the page was drawn arrives as events, in order, for its own project only', async () => {
  const project = await ctx.tenant('live');
  const I = `/dashboard/projects/${project.projectId}/inbox`;
  const before = await catchMessage(project.projectId, 'Already here');
  const abort = new AbortController();
  const res = await ctx.app.request(`${I}/live?after=${before}`, { headers: { cookie: [...b.jar].map(([k, v]) => `${k}=${v}`).join('; ') }, signal: abort.signal });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type')!, /text\/event-stream/);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  const nextEvent = async () => {
    for (;;) {
      const end = buffered.indexOf('\n\n');
      if (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (block.includes('event: caught')) return block;
        continue;
      }
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended');
      buffered += value;
    }
  };
  await catchMessage(other.projectId, 'Not for this inbox');
  const one = await catchMessage(project.projectId, 'Live <one>');
  const two = await catchMessage(project.projectId, 'Live two', { to: 'dave@example.org' });
  const first = await nextEvent();
  assert.match(first, new RegExp(`^id: ${one}$`, 'm'));
  const data = JSON.parse(/^data: (.*)$/m.exec(first)![1]!);
  assert.equal(data.subject, 'Live <one>');
  assert.equal(data.href, `${I}/${one}`);
  const second = await nextEvent();
  assert.match(second, new RegExp(`^id: ${two}$`, 'm'));
  assert.equal(JSON.parse(/^data: (.*)$/m.exec(second)![1]!).to, 'dave@example.org');
  abort.abort();
  await reader.cancel().catch(() => {});

  // A reconnect sends Last-Event-ID and gets only what came after it.
  const resumed = await ctx.app.request(`${I}/live?after=${before}`, {
    headers: { cookie: [...b.jar].map(([k, v]) => `${k}=${v}`).join('; '), 'last-event-id': one },
  });
  const resumedReader = resumed.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  while (!text.includes(`id: ${two}`)) text += (await resumedReader.read()).value ?? '';
  assert.doesNotMatch(text, new RegExp(`id: ${one}`));
  await resumedReader.cancel();

  assert.equal((await ctx.app.request(`${I}/live`)).status, 303, 'the stream needs a session');
  assert.equal((await b.get(`${Q}/inbox/live?after=msg_%00`)).res.status, 404);
});
