import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { chromium } from 'playwright-core';
import { createTestContext } from '../helpers/app.ts';
import { startTestWorker } from '../helpers/worker.ts';
import { waitFor } from '../helpers/wait.ts';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (apt-get install chromium)`;
if (skip) console.log(`# skipping the dashboard browser test: ${skip}`);

test('a real browser: signup, project, key, webhook secret, then a caught email whose script never runs', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  await startTestWorker(ctx.config, ctx.sql);
  const server = serve({ fetch: ctx.app.fetch, port: 0, hostname: '127.0.0.1' });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  after(() => browser.close());
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
