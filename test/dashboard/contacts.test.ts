import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createContact } from '../../src/contacts/service.ts';
import { createProperty } from '../../src/contacts/properties.ts';
import { createSegment } from '../../src/segments/service.ts';
import { createTopic } from '../../src/topics/service.ts';
import { signedInWithTwoProjects } from './client.ts';

/** §23.9: the Contacts, contact, Topics and Segments pages, in process, as the owner. */

const { ctx, b, a, other, P, Q } = await signedInWithTwoProjects();

const ids = (text: string, kind: string) => [...text.matchAll(new RegExp(`/${kind}/(${kind === 'contacts' ? 'contact' : kind}_\\w{26})"`, 'g'))].map((m) => m[1]);

test('contacts: add one from the form, find it by address in any case, filter by segment, page through', async () => {
  await b.get(`${P}/contacts`);
  const made = await b.post(`${P}/contacts`, { email: 'Ann@Example.com', first_name: 'Ann', last_name: '<b>Lee</b>' });
  assert.equal(made.res.status, 303);
  const contactPath = made.res.headers.get('location')!;
  assert.match(contactPath, new RegExp(`^${P}/contacts/contact_\\w{26}$`));
  const contactId = contactPath.split('/').at(-1)!;

  const list = await b.get(`${P}/contacts`);
  assert.match(list.text, /Ann@Example\.com/);
  assert.match(list.text, /Ann &lt;b&gt;Lee&lt;\/b&gt;/, 'names are escaped');
  assert.match(list.text, /<a href="[^"]+\/contacts">Contacts<\/a>/, 'the project navigation links to Contacts');
  assert.match(list.text, /Topics<\/a>/);

  const again = await b.post(`${P}/contacts`, { email: 'ann@example.com' });
  assert.equal(again.res.status, 409, 'one contact per address');
  assert.match(again.text, new RegExp(`already exists: ${contactId}`));
  const bad = await b.post(`${P}/contacts`, { email: 'not an address' });
  assert.equal(bad.res.status, 422);
  assert.match(bad.text, /email: Not a valid email address/);
  assert.match(bad.text, /value="not an address"/, 'what was typed is kept');

  const seg = await createSegment(ctx.sql, a.projectId, { name: 'Paying' });
  const inSeg = await createContact(ctx.sql, a.projectId, { email: 'bob@example.com', segment_ids: [seg.id] });
  for (let i = 0; i < 55; i++) await createContact(ctx.sql, a.projectId, { email: `filler${i}@example.com` });

  const found = await b.get(`${P}/contacts?email=ANN%40example.COM`);
  assert.deepEqual(ids(found.text, 'contacts'), [contactId]);
  const none = await b.get(`${P}/contacts?email=nobody%40example.com`);
  assert.deepEqual(ids(none.text, 'contacts'), []);
  assert.match(none.text, /No contact matches/);

  const segmented = await b.get(`${P}/contacts?segment=${seg.id}`);
  assert.deepEqual(ids(segmented.text, 'contacts'), [inSeg.id]);
  assert.match(segmented.text, new RegExp(`<option value="${seg.id}" selected="">Paying</option>`));

  const first = await b.get(`${P}/contacts`);
  const page1 = ids(first.text, 'contacts');
  assert.equal(page1.length, 50);
  const next = /href="([^"]+)" rel="next"/.exec(first.text)![1]!.replaceAll('&amp;', '&');
  const page2 = ids((await b.get(next)).text, 'contacts');
  assert.equal(page2.length, 7);
  assert.equal(new Set([...page1, ...page2]).size, 57, 'every contact once');

  assert.equal((await b.get(`${P}/contacts?after=nope`)).res.status, 404);
  assert.equal((await b.get(`${P}/contacts?segment=nope`)).res.status, 404);
});

test('a contact\'s page edits names, properties, unsubscribed, segments and topic choices, then deletes it', async () => {
  const plan = await createProperty(ctx.sql, a.projectId, { key: 'plan', type: 'string' });
  await createProperty(ctx.sql, a.projectId, { key: 'seats', type: 'number', fallback_value: 1 });
  const seg = await createSegment(ctx.sql, a.projectId, { name: 'Trial' });
  const news = await createTopic(ctx.sql, a.projectId, { name: 'News', default_subscription: 'opt_in' });
  const beta = await createTopic(ctx.sql, a.projectId, { name: 'Beta', default_subscription: 'opt_out' });
  const contact = await createContact(ctx.sql, a.projectId, { email: 'cy@example.com', properties: { plan: 'free' } });
  const page = `${P}/contacts/${contact.id}`;

  const shown = await b.get(page);
  assert.equal(shown.res.status, 200);
  assert.match(shown.text, /name="prop\.plan" value="free"/);
  assert.match(shown.text, /name="prop\.seats" value=""/);
  assert.match(shown.text, new RegExp(`name="topic\\.${news.id}"[^]*?<option value="opt_in" selected="">`));
  assert.match(shown.text, new RegExp(`name="topic\\.${beta.id}"[^]*?<option value="opt_out" selected="">`));

  const saved = await b.post(page, { first_name: 'Cy', last_name: '', unsubscribed: 'on', 'prop.plan': '', 'prop.seats': '4' });
  assert.equal(saved.res.status, 303);
  const [row] = await ctx.sql<[{ firstName: string; unsubscribed: boolean; properties: Record<string, unknown> }]>`
    select first_name, unsubscribed, properties from contacts where id = ${contact.id}`;
  assert.equal(row.firstName, 'Cy');
  assert.equal(row.unsubscribed, true);
  assert.deepEqual(row.properties, { seats: 4 }, 'an emptied property is cleared, a number stored as one');
  assert.ok(plan.id);
  const wrongType = await b.post(page, { first_name: 'Cy', 'prop.seats': 'many' });
  assert.equal(wrongType.res.status, 422);
  assert.match(wrongType.text, /seats is a number property/);

  assert.equal((await b.post(`${page}/segments`, { segment_id: seg.id })).res.status, 303);
  assert.match((await b.get(page)).text, new RegExp(`action="${page}/segments/${seg.id}/remove"`));
  assert.equal((await b.post(`${page}/topics`, { [`topic.${news.id}`]: 'opt_out', [`topic.${beta.id}`]: 'opt_in' })).res.status, 303);
  const choices = await ctx.sql<{ topicId: string; subscription: string }[]>`
    select topic_id, subscription from contact_topics where contact_id = ${contact.id} order by topic_id`;
  assert.deepEqual(Object.fromEntries(choices.map((c) => [c.topicId, c.subscription])), { [news.id]: 'opt_out', [beta.id]: 'opt_in' });
  assert.equal((await b.post(`${page}/segments/${seg.id}/remove`)).res.status, 303);
  assert.equal((await ctx.sql`select 1 from contact_segments where contact_id = ${contact.id}`).length, 0);

  const events = await ctx.sql<{ action: string; actorType: string }[]>`
    select action, actor_type from audit_log where target_id = ${contact.id} order by id`;
  assert.deepEqual(events.map((e) => e.action), ['contact.created', 'contact.updated', 'contact.segment_added', 'contact.topics_updated', 'contact.segment_removed']);
  assert.ok(events.slice(1).every((e) => e.actorType === 'member'), 'dashboard changes are the member\'s');

  assert.equal((await b.post(`${page}/delete`)).res.status, 303);
  assert.equal((await b.get(page)).res.status, 404);
  assert.equal((await b.get(`${P}/contacts/nope`)).res.status, 404);
});

test('topics: create with each field, edit name, description and visibility, delete', async () => {
  await b.get(`${P}/topics`);
  const made = await b.post(`${P}/topics`, { name: 'Releases', description: 'Once a month', default_subscription: 'opt_out', visibility: 'public' });
  assert.equal(made.res.status, 303);
  const [topic] = await ctx.sql<[{ id: string; defaultSubscription: string; visibility: string }]>`
    select id, default_subscription, visibility from topics where project_id = ${a.projectId} and name = 'Releases'`;
  assert.equal(topic.defaultSubscription, 'opt_out');
  assert.equal(topic.visibility, 'public');
  const list = await b.get(`${P}/topics`);
  assert.match(list.text, new RegExp(`id="topic-${topic.id}"[^]*?Once a month[^]*?opt_out[^]*?public`));

  const long = await b.post(`${P}/topics`, { name: 'x'.repeat(51), default_subscription: 'opt_in' });
  assert.equal(long.res.status, 422);
  assert.match(long.text, /name: String should have at most 50 characters/);

  assert.equal((await b.post(`${P}/topics/${topic.id}`, { name: 'Product releases', description: '', visibility: 'private' })).res.status, 303);
  const [edited] = await ctx.sql<[{ name: string; description: string | null; visibility: string; defaultSubscription: string }]>`
    select name, description, visibility, default_subscription from topics where id = ${topic.id}`;
  assert.deepEqual({ ...edited }, { name: 'Product releases', description: null, visibility: 'private', defaultSubscription: 'opt_out' });

  assert.equal((await b.post(`${P}/topics/${topic.id}/delete`)).res.status, 303);
  assert.equal((await ctx.sql`select 1 from topics where id = ${topic.id}`).length, 0);
  assert.equal((await b.post(`${P}/topics/${topic.id}/delete`)).res.status, 404);
});

test('segments: create, member counts, rename, delete', async () => {
  await b.get(`${P}/segments`);
  assert.equal((await b.post(`${P}/segments`, { name: 'VIP' })).res.status, 303);
  const [seg] = await ctx.sql<[{ id: string }]>`select id from segments where project_id = ${a.projectId} and name = 'VIP'`;
  for (const e of ['v1@example.com', 'v2@example.com', 'v3@example.com']) await createContact(ctx.sql, a.projectId, { email: e, segment_ids: [seg.id] });
  const list = await b.get(`${P}/segments`);
  assert.match(list.text, new RegExp(`id="segment-${seg.id}"[^]*?<td>3</td>`));
  assert.match(list.text, new RegExp(`href="${P}/contacts\\?segment=${seg.id}"`));
  assert.equal((await b.post(`${P}/segments`, { name: ' ' })).res.status, 422);

  assert.equal((await b.post(`${P}/segments/${seg.id}`, { name: 'Very important' })).res.status, 303);
  assert.match((await b.get(`${P}/segments`)).text, /Very important/);
  assert.equal((await b.post(`${P}/segments/${seg.id}/delete`)).res.status, 303);
  assert.equal((await ctx.sql`select 1 from segments where id = ${seg.id}`).length, 0);
});

test('isolation: another project\'s contact, topic and segment are 404 through this project\'s URLs', async () => {
  const theirSeg = await createSegment(ctx.sql, other.projectId, { name: 'Theirs' });
  const theirTopic = await createTopic(ctx.sql, other.projectId, { name: 'Theirs', default_subscription: 'opt_in' });
  const theirs = await createContact(ctx.sql, other.projectId, { email: 'theirs@example.com', segment_ids: [theirSeg.id] });
  await b.get(`${P}/contacts`);
  assert.equal((await b.get(`${P}/contacts/${theirs.id}`)).res.status, 404);
  assert.equal((await b.post(`${P}/contacts/${theirs.id}`, { first_name: 'Mine' })).res.status, 404);
  assert.equal((await b.post(`${P}/contacts/${theirs.id}/delete`)).res.status, 404);
  assert.equal((await b.post(`${P}/topics/${theirTopic.id}`, { name: 'Mine' })).res.status, 404);
  assert.equal((await b.post(`${P}/topics/${theirTopic.id}/delete`)).res.status, 404);
  assert.equal((await b.post(`${P}/segments/${theirSeg.id}/delete`)).res.status, 404);
  assert.deepEqual(ids((await b.get(`${P}/contacts?segment=${theirSeg.id}`)).text, 'contacts'), []);
  assert.deepEqual(ids((await b.get(`${P}/contacts?email=theirs%40example.com`)).text, 'contacts'), []);
  const mine = await createContact(ctx.sql, a.projectId, { email: 'mine@example.com' });
  const cross = await b.post(`${P}/contacts/${mine.id}/segments`, { segment_id: theirSeg.id });
  assert.equal(cross.res.status, 404, 'a segment of another project cannot be joined');
  const crossTopic = await b.post(`${P}/contacts/${mine.id}/topics`, { [`topic.${theirTopic.id}`]: 'opt_out' });
  assert.equal(crossTopic.res.status, 422);
  const [still] = await ctx.sql<[{ firstName: string | null }]>`select first_name from contacts where id = ${theirs.id}`;
  assert.equal(still.firstName, null);
  assert.equal((await ctx.sql`select 1 from topics where id = ${theirTopic.id}`).length, 1);
  assert.ok((await b.get(`${Q}/contacts`)).text.includes('theirs@example.com'), 'the owner sees it in its own project');
});
