import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { Browser } from 'playwright-core';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage } from '../helpers/browser.ts';
import { ROLES } from '../../src/members/roles.ts';
import { createContact } from '../../src/contacts/service.ts';
import { createSegment } from '../../src/segments/service.ts';
import { createTopic } from '../../src/topics/service.ts';
import { createBroadcast } from '../../src/broadcasts/service.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { memberSession } from './client.ts';

const skip = browserSkip('the contacts browser test');

/** A browser page signed in as a member with `role` (the session row written as sign-in would). */
async function signedIn(ctx: Awaited<ReturnType<typeof createTestContext>>, browser: Browser, origin: string, role: (typeof ROLES)[number], errors: string[]) {
  const { b } = await memberSession(ctx, role);
  const context = await browser.newContext();
  await context.addCookies([{ name: 'mailroom_session', value: b.jar.get('mailroom_session')!, url: origin }]);
  return watchPage(await context.newPage(), errors);
}

test('a real browser: Contacts, Topics, Segments and Broadcasts for every role; a developer searches, creates a topic and watches a broadcast send', { skip, timeout: 240_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development', PUBLIC_BASE_URL: 'https://mail.example.test' } });
  const origin = await serveApp(ctx.app);
  const browser = await launchBrowser();
  const errors: string[] = [];
  const { projectId } = await ctx.tenant('Shop');
  const seg = await createSegment(ctx.sql, projectId, { name: 'Customers' });
  await createTopic(ctx.sql, projectId, { name: 'Product news', default_subscription: 'opt_in' });
  const ann = await createContact(ctx.sql, projectId, { email: 'ann@example.com', first_name: 'Ann', segment_ids: [seg.id] });
  await createContact(ctx.sql, projectId, { email: 'bob@example.com' });
  const P = `${origin}/dashboard/projects/${projectId}`;
  const bc = await createBroadcast(ctx.sql, projectId, { name: 'Launch', segment_id: seg.id, from: 'news@example.test', subject: 'Hi {{{contact.first_name|there}}}', html: '<p>Hello {{{contact.first_name|there}}}</p>' });

  for (const role of ROLES) {
    const page = await signedIn(ctx, browser, origin, role, errors);
    await page.goto(`${P}/contacts`);
    await page.click('header nav a:text("Contacts")');
    await page.waitForURL(`${P}/contacts`);
    assert.equal(await page.locator('#contacts tbody tr').count(), 2, role);
    await page.goto(`${P}/contacts/${ann.id}`);
    assert.equal(await page.locator('h1').textContent(), 'ann@example.com');
    await page.goto(`${P}/topics`);
    assert.match((await page.textContent('#topics'))!, /Product news/);
    await page.goto(`${P}/segments`);
    assert.match((await page.textContent('#segments'))!, /Customers/);
    await page.click('header nav a:text("Broadcasts")');
    await page.waitForURL(`${P}/broadcasts`);
    assert.match((await page.textContent('#broadcasts'))!, /Launch/);
    await page.click('#broadcasts a:text("Launch")');
    assert.equal(await page.frameLocator('#broadcast-preview').locator('p').first().textContent(), 'Hello there');
    for (const path of ['/contacts', `/contacts/${ann.id}`, '/topics', '/segments', '/broadcasts', `/broadcasts/${bc.id}`]) {
      await page.goto(`${P}${path}`);
      const forms = await page.locator('form[method=post]').evaluateAll((fs) => fs.map((f) => f.getAttribute('action')));
      if (role === 'viewer') {
        assert.deepEqual(forms, ['/dashboard/logout'], `viewer ${path}: no form but sign-out`);
        assert.equal(await page.locator('button:text("Save"):enabled').count(), 0, `viewer ${path}: nothing to save`);
      } else {
        assert.ok(forms.length > 1, `${role} ${path} has its forms`);
      }
    }
    await page.context().close();
  }

  // A developer finds a contact by address, filters by segment, and creates a topic.
  const dev = await signedIn(ctx, browser, origin, 'developer', errors);
  await dev.goto(`${P}/contacts`);
  await dev.fill('#contact-search input[name=email]', 'BOB@example.com');
  await dev.click('#contact-search button:text("Find")');
  await dev.waitForURL(/email=BOB%40example\.com/);
  assert.deepEqual(await dev.locator('#contacts tbody td:first-child').allTextContents(), ['bob@example.com']);
  await dev.click('a:text("Show all")');
  await dev.selectOption('#contact-search select[name=segment]', seg.id);
  await dev.click('#contact-search button:text("Find")');
  await dev.waitForURL(new RegExp(`segment=${seg.id}`));
  assert.deepEqual(await dev.locator('#contacts tbody td:first-child').allTextContents(), ['ann@example.com']);

  await dev.goto(`${P}/topics`);
  await dev.fill('form[action$="/topics"] input[name=name]', 'Beta program');
  await dev.fill('form[action$="/topics"] input[name=description]', 'Early features');
  await dev.selectOption('form[action$="/topics"] select[name=default_subscription]', 'opt_out');
  await dev.click('button:text("Create topic")');
  await dev.waitForURL(`${P}/topics`);
  assert.match((await dev.textContent('#topics'))!, /Beta program[^]*Early features[^]*opt_out/);
  const [row] = await ctx.sql<[{ defaultSubscription: string }]>`select default_subscription from topics where project_id = ${projectId} and name = 'Beta program'`;
  assert.equal(row.defaultSubscription, 'opt_out');
  const [audit] = await ctx.sql<[{ actorType: string }]>`select actor_type from audit_log where action = 'topic.created' and project_id = ${projectId} order by id desc limit 1`;
  assert.equal(audit.actorType, 'member');

  // The developer previews the broadcast as Ann, sends it now, and watches the bar reach the end without reloading.
  await dev.goto(`${P}/broadcasts/${bc.id}`);
  await dev.fill('#preview-for input[name=contact]', 'ann@example.com');
  await dev.click('#preview-for button:text("Preview")');
  await dev.waitForURL(/contact=ann%40example\.com/);
  assert.equal(await dev.frameLocator('#broadcast-preview').locator('p').first().textContent(), 'Hello Ann');
  await dev.click('button:text("Send or schedule")');
  await dev.waitForSelector('#broadcast-progress');
  assert.equal(await dev.textContent('#progress-status'), 'sending');
  const worker = await startTestWorker(ctx.config, ctx.sql);
  after(() => worker.stop());
  await dev.waitForFunction(() => document.getElementById('progress-status')?.textContent === 'sent', undefined, { timeout: 60_000 });
  assert.equal(await dev.getAttribute('#broadcast-progress', 'value'), '100');
  assert.equal(await dev.textContent('[data-count="recipients"]'), '1');
  assert.equal(await dev.textContent('[data-count="sent"]'), '1');

  assert.deepEqual(errors, []);
});
