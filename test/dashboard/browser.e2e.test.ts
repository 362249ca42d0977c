import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';

const skip = browserSkip('the dashboard browser test');

test('a real browser: signup, project, key, webhook secret, then a caught email whose script never runs', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  await startTestWorker(ctx.config, ctx.sql);
  const origin = await serveApp(ctx.app);

  const browser = await launchBrowser();
  const page = await browser.newPage();
  page.setDefaultTimeout(10_000);

  await page.goto(`${origin}/`);
  assert.equal(new URL(page.url()).pathname, '/dashboard/signup');
  await page.fill('input[name=email]', 'owner@example.com');
  await page.fill('input[name=password]', 'correct horse battery');
  await page.click('button[type=submit]');
  await page.waitForURL(`${origin}/dashboard`);
  const cookies = await page.context().cookies();
  const session = cookies.find((c) => c.name === 'mailroom_session');
  assert.ok(session?.httpOnly && session.sameSite === 'Lax');

  await page.fill('input[name=name]', 'Browser project');
  await page.click('button:has-text("Create project")');
  await page.waitForURL(/\/keys$/);
  assert.match(page.url(), /\/dashboard\/projects\/proj_\w{26}\/keys$/);
  await page.fill('input[name=name]', 'e2e key');
  await page.click('button:has-text("Create key")');
  await page.waitForSelector('#new-key');
  const key = (await page.textContent('#new-key'))!;
  assert.match(key, /^sk_[\w-]{43}$/);

  await page.click('text=Webhooks');
  await page.fill('input[name=url]', 'http://127.0.0.1:9/hook');
  await page.click('button:has-text("Register")');
  await page.waitForURL(/\/webhooks\/wh_\w{26}$/);
  assert.equal(await page.locator('text=whsec_').count(), 0, 'no secret before reveal');
  await page.click('button:has-text("Reveal signing secret")');
  await page.waitForSelector('#signing-secret');
  assert.match((await page.textContent('#signing-secret'))!, /^whsec_[A-Za-z0-9+/]{43}=$/);

  const sent = await fetch(`${origin}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      from: 'app@example.com', to: 'ann@example.net', subject: 'Caught in the sink',
      html: `<script>document.title='pwned';window.parent.document.title='pwned'</script><h1>Hello</h1><p>From the sink.</p>`,
      text: 'Hello from the sink.',
    }),
  });
  assert.equal(sent.status, 201);
  await waitFor('the sink to catch the email', async () => (await ctx.sql`select 1 from sink_messages`).length === 1, 20_000);

  await page.click('text=Inbox');
  await page.click('text=Caught in the sink');
  await page.waitForURL(/\/inbox\/msg_\w{26}$/);
  const title = await page.title();
  const h1 = page.frameLocator('iframe').locator('h1');
  assert.equal(await h1.textContent({ timeout: 10_000 }), 'Hello', 'the HTML renders inside the frame');
  const frame = page.frames().find((f) => f.url().endsWith('/html'));
  assert.ok(frame, 'the caught HTML is its own frame');
  assert.notEqual(await frame.title(), 'pwned', 'the script inside the frame did not run');
  assert.equal(await page.title(), title, 'nor did it reach the dashboard');
  assert.ok(await page.locator('pre', { hasText: 'Hello from the sink.' }).count() > 0, 'the text part is shown');
  assert.equal(await page.locator('script').count(), 0, 'no script element in the dashboard page');

  await page.screenshot({ path: '/tmp/dashboard-inbox.png', fullPage: false });
});

test('a real browser: overview chart, emails filtered and opened, live inbox, suppressions, redelivery, key permissions; no console errors', { skip, timeout: 120_000 }, async () => {
  const started = Date.now();
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  await startTestWorker(ctx.config, ctx.sql);
  const origin = await serveApp(ctx.app);
  const shots = process.env.SCREENSHOT_DIR ?? join(tmpdir(), 'mailroom-e2e');
  mkdirSync(shots, { recursive: true });

  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const consoleErrors: string[] = [];
  watchPage(page, consoleErrors);

  await signUpOwner(page, origin);
  await page.fill('input[name=name]', 'Flows');
  await page.click('button:has-text("Create project")');
  await page.waitForURL(/\/keys$/);
  const projectPath = new URL(page.url()).pathname.replace(/\/keys$/, '');

  // Key permissions: a sending-only key, listed as such.
  await page.fill('input[name=name]', 'sender');
  await page.selectOption('select[name=permission]', 'sending');
  await page.click('button:has-text("Create key")');
  const key = (await page.textContent('#new-key'))!;
  await page.click('text=Back to API keys');
  assert.equal(await page.locator('tr', { hasText: 'sender' }).locator('td', { hasText: 'sending only' }).count(), 1);
  const send = async (subject: string, extra: Record<string, unknown> = {}) => {
    const res = await fetch(`${origin}/v1/emails`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'app@example.com', to: 'ann@example.net', subject, text: `Body of ${subject}`, ...extra }),
    });
    assert.equal(res.status, 201);
    return ((await res.json()) as { id: string }).id;
  };
  const forbidden = await fetch(`${origin}/v1/emails`, { headers: { authorization: `Bearer ${key}` } });
  assert.equal(forbidden.status, 403, 'the sending key cannot list');

  // A webhook endpoint nothing listens on, so its deliveries fail and can be redelivered.
  await page.click('nav >> text=Webhooks');
  await page.fill('input[name=url]', 'http://127.0.0.1:9/hook');
  await page.click('button:has-text("Register")');
  await page.waitForURL(/\/webhooks\/wh_\w{26}$/);

  // Live inbox: the page is open before the mail is sent, and the row appears without a reload.
  await page.click('nav >> text=Inbox');
  await page.waitForSelector('#live-status:has-text("Live")');
  await page.evaluate(() => { (globalThis as unknown as { stillHere: boolean }).stillHere = true; });
  const welcome = await send('Welcome aboard', { tags: [{ name: 'flow', value: 'welcome' }] });
  await send('Weekly digest', { tags: [{ name: 'flow', value: 'digest' }] });
  await page.waitForSelector('#inbox tbody tr:has-text("Welcome aboard")', { timeout: 20_000 });
  await page.waitForSelector('#inbox tbody tr:has-text("Weekly digest")', { timeout: 20_000 });
  assert.equal(await page.evaluate(() => (globalThis as unknown as { stillHere?: boolean }).stillHere), true, 'no reload happened');
  assert.equal(await page.locator('#inbox-empty').isVisible(), false);
  await page.screenshot({ path: join(shots, 'inbox-live.png') });
  await page.fill('input[name=q]', 'digest');
  await page.click('button:has-text("Search")');
  await page.waitForURL(/\?q=digest$/);
  assert.equal(await page.locator('#inbox tbody tr').count(), 1);

  // Emails: filter by tag, open the email, follow it to its caught copy.
  await page.click('nav >> text=Emails');
  await page.fill('input[name=tag]', 'flow:welcome');
  await page.click('button:has-text("Filter")');
  await page.waitForURL(/tag=flow%3Awelcome/);
  assert.equal(await page.locator('#emails tbody tr').count(), 1);
  await page.click('#emails >> text=Welcome aboard');
  await page.waitForURL(new RegExp(`/emails/${welcome}$`));
  await page.waitForSelector('#timeline');
  assert.match((await page.textContent('#timeline'))!, /email\.sent/);
  assert.match((await page.textContent('#email-deliveries'))!, /127\.0\.0\.1:9\/hook/);
  await page.screenshot({ path: join(shots, 'email.png'), fullPage: true });
  await page.click('#caught-link');
  await page.waitForURL(/\/inbox\/msg_\w{26}$/);
  assert.equal(await page.frameLocator('iframe').locator('body').count(), 0, 'a text-only email has no HTML frame');

  // Deliveries: the endpoint's page lists them; Redeliver queues a new one.
  await page.click('nav >> text=Webhooks');
  await page.click('text=Deliveries');
  await page.waitForURL(/\/deliveries$/);
  await page.waitForSelector('#deliveries tbody tr');
  const before = await page.locator('#deliveries tbody tr').count();
  await page.locator('#deliveries tbody tr').first().locator('button:has-text("Redeliver")').click();
  await page.waitForSelector('#redelivered');
  assert.equal(await page.locator('#deliveries tbody tr').count(), before + 1);
  await page.screenshot({ path: join(shots, 'deliveries.png'), fullPage: true });

  // Suppressions: add one by hand, then lift it.
  await page.click('nav >> text=Suppressions');
  await page.fill('input[name=email]', 'Blocked@Example.net');
  await page.click('button:has-text("Suppress")');
  await page.waitForSelector('#suppressions td:has-text("blocked@example.net")');
  await page.screenshot({ path: join(shots, 'suppressions.png') });
  await page.click('button[aria-label="Lift blocked@example.net"]');
  await page.waitForSelector('text=No suppressed addresses.');

  // Overview: the chart drawn on the server shows today's sends.
  await page.click('nav >> text=Overview');
  await page.waitForURL(new RegExp(`${projectPath}$`));
  assert.equal(await page.locator('svg.chart g[data-series]').count(), 7);
  assert.equal(await page.locator('svg.chart rect').count(), 7 * 14);
  assert.match((await page.textContent('#totals [data-series=sent]'))!, /^2/);
  await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });

  assert.deepEqual(consoleErrors, [], 'no console errors on any page');
  console.log(`# dashboard flows e2e: ${Date.now() - started} ms; screenshots in ${shots}`);
});
