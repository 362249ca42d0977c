import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { createContact } from '../../src/contacts/service.ts';
import { createProperty } from '../../src/contacts/properties.ts';
import { createSegment } from '../../src/segments/service.ts';
import { createTopic } from '../../src/topics/service.ts';
import { browser, signIn } from './client.ts';
import { progressReads } from '../../dashboard/live.ts';
import { setTimeout as sleep } from 'node:timers/promises';

/** §23.9: the Broadcasts pages, in process, as the owner. */

const ctx = await createTestContext({ env: { NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://mail.example.test' } });
const b = browser(ctx);
await signIn(b);
const a = await ctx.tenant('project A');
const other = await ctx.tenant('project B');
const P = `/dashboard/projects/${a.projectId}`;
const Q = `/dashboard/projects/${other.projectId}`;

const seg = await createSegment(ctx.sql, a.projectId, { name: 'Everyone' });
const topic = await createTopic(ctx.sql, a.projectId, { name: 'News', default_subscription: 'opt_in' });
await createProperty(ctx.sql, a.projectId, { key: 'plan', type: 'string', fallback_value: 'free' });
const ann = await createContact(ctx.sql, a.projectId, { email: 'ann@example.com', first_name: 'Ann <b>', properties: { plan: 'pro' }, segment_ids: [seg.id] });
for (let i = 0; i < 20; i++) await createContact(ctx.sql, a.projectId, { email: `r${i}@example.com`, segment_ids: [seg.id] });

const compose = {
  name: 'Launch', segment_id: seg.id, topic_id: topic.id, from: 'News <news@example.test>',
  subject: 'Hi {{{contact.first_name|there}}}', preview_text: 'Big news', html: '<p>Hello {{{contact.first_name|there}}}, plan {{{contact.plan}}}</p>', text: '',
};

async function draft(fields: Record<string, string> = compose) {
  await b.get(`${P}/broadcasts`);
  const made = await b.post(`${P}/broadcasts`, fields);
  assert.equal(made.res.status, 303, made.text);
  return made.res.headers.get('location')!;
}

test('compose: a draft is saved from the list\'s form, listed, edited; a bad one keeps what was typed', async () => {
  const page = await draft();
  assert.match(page, new RegExp(`^${P}/broadcasts/bc_\\w{26}$`));
  const list = await b.get(`${P}/broadcasts`);
  assert.match(list.text, /<a href="[^"]+\/broadcasts">Broadcasts<\/a>/, 'the project navigation links to Broadcasts');
  assert.match(list.text, new RegExp(`href="${page}">Launch</a>[^]*?Everyone[^]*?draft`));

  const shown = await b.get(page);
  assert.match(shown.text, /name="subject"[^>]*value="Hi \{\{\{contact.first_name\|there\}\}\}"/);
  assert.match(shown.text, new RegExp(`<option value="${topic.id}" selected="">News`));
  assert.equal((await b.post(page, { ...compose, subject: 'Renamed {{{EMAIL}}}', topic_id: '' })).res.status, 303);
  const [row] = await ctx.sql<[{ subject: string; topicId: string | null }]>`select subject, topic_id from broadcasts where id = ${page.split('/').at(-1)!}`;
  assert.deepEqual({ ...row }, { subject: 'Renamed {{{EMAIL}}}', topicId: null });

  await b.get(`${P}/broadcasts`);
  const bad = await b.post(`${P}/broadcasts`, { ...compose, from: 'not an address', html: '<p>kept</p>' });
  assert.equal(bad.res.status, 422);
  assert.match(bad.text, /from: /);
  assert.match(bad.text, /&lt;p&gt;kept&lt;\/p&gt;<\/textarea>/);
});

test('edit: a broadcast made from a template stays the template\'s when saved as shown, and becomes inline once its html is edited', async () => {
  const made = await ctx.call(a.key, '/v1/templates', { method: 'POST', body: {
    name: 'Monthly', alias: 'dash-monthly', from: 'News <news@example.test>', subject: 'News: {{headline}}',
    html: '<p>Hello,\n{{headline}}</p>', text: 'Line one\n{{headline}}', variables: [{ key: 'headline', type: 'string', fallback_value: null }],
  } });
  assert.equal(made.status, 201, await made.clone().text());
  const templateId = ((await made.json()) as { id: string }).id;
  assert.equal((await ctx.call(a.key, `/v1/templates/${templateId}/publish`, { method: 'POST' })).status, 200);
  const created = await ctx.call(a.key, '/v1/broadcasts', { method: 'POST', body: { segment_id: seg.id, name: 'From a template', template: { id: templateId, variables: { headline: 'June' } } } });
  assert.equal(created.status, 201, await created.clone().text());
  const bc = (await created.json()) as { id: string; html: string; text: string };
  const page = `${P}/broadcasts/${bc.id}`;
  const templateOf = async () => (await ctx.sql<[{ templateId: string | null; html: string }]>`select template_id, html from broadcasts where id = ${bc.id}`)[0];

  const shown = await b.get(page);
  assert.match(shown.text, new RegExp(`id="broadcast-template"[^>]*>Rendered from template <code>${templateId}</code> version 1`));
  // Saved as a browser submits the form: a new name, the textareas as shown, with CRLF line ends.
  const asShown = { name: 'Renamed', segment_id: seg.id, topic_id: '', from: 'News <news@example.test>', subject: 'News: June', preview_text: '',
    html: bc.html.replace(/\n/g, '\r\n'), text: bc.text.replace(/\n/g, '\r\n') };
  assert.equal((await b.post(page, asShown)).res.status, 303);
  assert.equal((await templateOf()).templateId, templateId, 'a save that leaves the content as shown keeps the template');

  await b.get(page);
  assert.equal((await b.post(page, { ...asShown, html: '<p>My own words</p>' })).res.status, 303);
  const edited = await templateOf();
  assert.deepEqual({ ...edited }, { templateId: null, html: '<p>My own words</p>' });
  assert.doesNotMatch((await b.get(page)).text, /id="broadcast-template"/);
});

test('preview: rendered for a chosen contact in a sandboxed frame under its own CSP; a test goes to the address typed', async () => {
  const page = await draft();
  const blank = await b.get(`${page}/preview`);
  assert.equal(blank.res.status, 200);
  assert.match(blank.res.headers.get('content-security-policy')!, /sandbox/);
  assert.match(blank.text, /Hello there, plan free/, 'a blank contact shows the fallbacks');
  assert.match(blank.text, /unsubscribe\.invalid/, 'a preview never carries a real contact\'s link');

  const chosen = await b.get(`${page}?contact=ANN%40example.com`);
  assert.match(chosen.text, new RegExp(`<iframe id="broadcast-preview" sandbox="" title="Broadcast preview" src="${page}/preview\\?contact=${ann.id}"`));
  const framed = await b.get(`${page}/preview?contact=${ann.id}`);
  assert.match(framed.text, /Hello Ann &#60;b&#62;, plan pro/, 'the contact\'s values, escaped');
  assert.match((await b.get(`${page}?contact=nobody%40example.com`)).text, /No contact of this project is nobody@example\.com/);

  await b.get(`${page}?contact=${ann.id}`);
  const sent = await b.post(`${page}/test`, { to: 'qa@example.net', contact: ann.id });
  assert.equal(sent.res.status, 200);
  assert.match(sent.text, /Test sent to qa@example\.net: email (email_\w{26})/);
  const [email] = await ctx.sql<[{ subject: string; to: string[]; broadcastId: string | null }]>`
    select subject, to_addresses as to, broadcast_id from emails where project_id = ${a.projectId} order by id desc limit 1`;
  assert.deepEqual({ ...email }, { subject: '[Test] Hi Ann <b>', to: ['qa@example.net'], broadcastId: null });
  const badTo = await b.post(`${page}/test`, { to: 'nope' });
  assert.equal(badTo.res.status, 422);
  const [still] = await ctx.sql<[{ status: string }]>`select status from broadcasts where id = ${page.split('/').at(-1)!}`;
  assert.equal(still.status, 'draft', 'a test does not send the broadcast');
});

test('live progress: every viewer of a sending broadcast gets its progress, from one read a second in the process', async () => {
  const page = await draft();
  await b.get(page);
  assert.equal((await b.post(`${page}/send`, { scheduled_at: '' })).res.status, 303);
  const cookie = [...b.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const before = progressReads();
  const WATCH_MS = 3_000;
  // Five viewers at once, each following for three seconds; no worker runs, so it stays sending.
  const seen = await Promise.all(Array.from({ length: 5 }, async () => {
    const res = await ctx.app.request(`${page}/live`, { headers: { cookie } });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const until = Date.now() + WATCH_MS;
    let text = '';
    for (;;) {
      const chunk = await Promise.race([reader.read(), sleep(Math.max(0, until - Date.now())).then(() => undefined)]);
      if (!chunk || chunk.done) break;
      text += new TextDecoder().decode(chunk.value);
    }
    await reader.cancel();
    return text.split('\n\n').filter((e) => e.startsWith('event: progress')).map((e) => JSON.parse(e.split('data: ')[1]!) as { status: string });
  }));
  const reads = progressReads() - before;
  for (const events of seen) assert.equal(events[0]?.status, 'sending', 'each viewer had the progress at once');
  // Unshared, five viewers read at least fifteen times in three seconds; shared, about one a second.
  assert.ok(reads >= 1 && reads <= 4, `reads: ${reads}`);
  assert.equal((await b.post(`${page}/cancel`)).res.status, 303);
});

test('schedule in words, cancel back to draft; send now: the bar follows the counts to the end', async () => {
  const page = await draft();
  const id = page.split('/').at(-1)!;
  await b.get(page);
  assert.equal((await b.post(`${page}/send`, { scheduled_at: 'in 2 hours' })).res.status, 303);
  const [scheduled] = await ctx.sql<[{ status: string; scheduledAt: Date }]>`select status, scheduled_at from broadcasts where id = ${id}`;
  assert.equal(scheduled.status, 'scheduled');
  assert.ok(Math.abs(scheduled.scheduledAt.getTime() - Date.now() - 2 * 3600_000) < 120_000, String(scheduled.scheduledAt));
  const shown = await b.get(page);
  assert.match(shown.text, /Cancel the schedule/);
  assert.equal((await b.post(`${page}/send`, { scheduled_at: 'whenever you like' })).res.status, 422);
  assert.equal((await b.post(`${page}/cancel`)).res.status, 303);
  assert.equal((await ctx.sql<[{ status: string }]>`select status from broadcasts where id = ${id}`)[0].status, 'draft');
  assert.equal((await b.post(`${page}/cancel`)).res.status, 409, 'a draft cannot be canceled');

  await b.get(page);
  assert.equal((await b.post(`${page}/send`, { scheduled_at: '' })).res.status, 303);
  const sending = await b.get(page);
  assert.match(sending.text, /<progress id="broadcast-progress" max="100" value="\d+" data-live="[^"]+\/live">/);
  assert.match(sending.text, /<noscript><meta http-equiv="refresh" content="2"\/?><\/noscript>/);
  assert.doesNotMatch(sending.text, /name="subject"/, 'a sending broadcast is no longer editable');

  const worker = await startTestWorker(ctx.config, ctx.sql);
  after(() => worker.stop());
  const live = await ctx.app.request(`${page}/live`, { headers: { cookie: [...b.jar].map(([k, v]) => `${k}=${v}`).join('; ') } });
  assert.equal(live.status, 200);
  const events = (await live.text()).split('\n\n').filter((e) => e.startsWith('event: progress')).map((e) => JSON.parse(e.split('data: ')[1]!));
  const last = events.at(-1)!;
  assert.equal(last.done, true);
  assert.equal(last.status, 'sent');
  assert.equal(last.percent, 100);
  assert.equal(last.counts.recipients, 21);
  await waitFor('every copy sent', async () => (await ctx.sql`select 1 from emails where broadcast_id = ${id} and status = 'sent'`).length === 21, 60_000, 100);
  const done = await b.get(page);
  assert.match(done.text, /<b data-count="recipients">21<\/b>/);
  assert.match(done.text, /<b data-count="sent">21<\/b>/);
  assert.doesNotMatch(done.text, /data-live=|http-equiv="refresh"/);
});

test('isolation: another project\'s broadcast is a 404 through this project\'s URLs, and its segment cannot be chosen', async () => {
  const theirSeg = await createSegment(ctx.sql, other.projectId, { name: 'Theirs' });
  await b.get(`${Q}/broadcasts`);
  const theirs = await b.post(`${Q}/broadcasts`, { ...compose, segment_id: theirSeg.id, topic_id: '' });
  assert.equal(theirs.res.status, 303);
  const theirPath = theirs.res.headers.get('location')!.replace(Q, P);
  assert.equal((await b.get(theirPath)).res.status, 404);
  assert.equal((await b.get(`${theirPath}/preview`)).res.status, 404);
  await b.get(`${P}/broadcasts`);
  for (const action of ['send', 'cancel', 'test']) assert.equal((await b.post(`${theirPath}/${action}`, { to: 'x@example.com' })).res.status, 404, action);
  const cross = await b.post(`${P}/broadcasts`, { ...compose, segment_id: theirSeg.id });
  assert.equal(cross.res.status, 422);
  assert.match(cross.text, /segment_id: No segment of this project/);
});
