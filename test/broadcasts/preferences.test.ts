import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { signContactToken } from '../../src/unsubscribe/token.ts';
import { seedSegment, seedTopic, setSubscription } from './fixtures.ts';

const ctx = await createTestContext({ env: { PUBLIC_BASE_URL: 'https://mail.example.test' } });
const form = (path: string, body: string) => ctx.app.request(path, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });

test('the preferences page lists public topics only, saves choices, and can leave everything, without JavaScript', async () => {
  const { projectId } = await ctx.tenant('prefs');
  const { contactIds } = await seedSegment(ctx.sql, projectId, 1);
  const news = await seedTopic(ctx.sql, projectId, 'opt_in', 'public', 'News');
  const tips = await seedTopic(ctx.sql, projectId, 'opt_out', 'public', 'Tips');
  const secret = await seedTopic(ctx.sql, projectId, 'opt_in', 'private', 'Internal');
  await setSubscription(ctx.sql, projectId, contactIds[0]!, secret, 'opt_in');
  const path = `/unsubscribe/${signContactToken(ctx.config.secretKey, { projectId, contactId: contactIds[0]!, topicId: news })}`;

  const page = await ctx.app.request(path);
  assert.equal(page.status, 200);
  const html = await page.text();
  assert.match(html, /News/);
  assert.match(html, /Tips/);
  assert.ok(!html.includes('Internal'), 'a private topic is not shown');
  assert.match(html, new RegExp(`value="${news}" checked`), 'News is opt_in by default');
  assert.ok(!html.includes(`value="${tips}" checked`), 'Tips is opt_out by default');
  assert.ok(!/<script/i.test(html));
  assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);

  // Save: keep Tips, leave News; the private topic is untouched.
  assert.equal((await form(path, `action=save&topic=${tips}`)).status, 200);
  const subs = Object.fromEntries((await ctx.sql<{ topicId: string; subscription: string }[]>`
    select topic_id, subscription from contact_topics where contact_id = ${contactIds[0]!}`).map((r) => [r.topicId, r.subscription]));
  assert.deepEqual(subs, { [news]: 'opt_out', [tips]: 'opt_in', [secret]: 'opt_in' });

  // Leave everything.
  assert.equal((await form(path, 'action=all')).status, 200);
  const [c] = await ctx.sql<[{ unsubscribed: boolean }]>`select unsubscribed from contacts where id = ${contactIds[0]!}`;
  assert.equal(c.unsubscribed, true);
});

test('security: a token of another project, a forged one, or one for a deleted contact changes nothing', async () => {
  const a = await ctx.tenant('prefs-a');
  const b = await ctx.tenant('prefs-b');
  const { contactIds } = await seedSegment(ctx.sql, a.projectId, 1);
  // A token that names project b with a's contact: the contact is not b's.
  const crossed = `/unsubscribe/${signContactToken(ctx.config.secretKey, { projectId: b.projectId, contactId: contactIds[0]!, topicId: null })}`;
  assert.equal((await form(crossed, 'List-Unsubscribe=One-Click')).status, 404);
  const forged = `/unsubscribe/${signContactToken('another-secret-key-that-is-long-enough-000000', { projectId: a.projectId, contactId: contactIds[0]!, topicId: null })}`;
  assert.equal((await form(forged, 'List-Unsubscribe=One-Click')).status, 400);
  assert.equal((await ctx.app.request(forged)).status, 400);
  const [c] = await ctx.sql<[{ unsubscribed: boolean }]>`select unsubscribed from contacts where id = ${contactIds[0]!}`;
  assert.equal(c.unsubscribed, false);
  await ctx.sql`delete from contacts where id = ${contactIds[0]!}`;
  const gone = `/unsubscribe/${signContactToken(ctx.config.secretKey, { projectId: a.projectId, contactId: contactIds[0]!, topicId: null })}`;
  assert.equal((await form(gone, 'List-Unsubscribe=One-Click')).status, 404);
  assert.equal((await ctx.app.request(gone)).status, 404);
});
