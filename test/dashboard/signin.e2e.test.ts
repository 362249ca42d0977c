import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { ownerSetupUrl } from '../../dashboard/setup.ts';
import { browser as formClient, OWNER } from './client.ts';
import { browserSkip, serveApp, launchBrowser, watchPage } from '../helpers/browser.ts';

const skip = browserSkip('the sign-in browser test');

test('a real browser, production: the setup link signs up the owner, and a flood of wrong passwords from elsewhere never locks them out', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { TRUST_PROXY: 'true' } });
  const origin = await serveApp(ctx.app);

  const chrome = await launchBrowser();
  const consoleErrors: string[] = [];
  // The refusals this test provokes are answers of 400 and above; only script errors count here.
  const watch = (page: import('playwright-core').Page) => watchPage(page, consoleErrors, { httpErrors: false, timeoutMs: 15_000 });

  // Without the link: the 403 page says where the link is.
  const stranger = await chrome.newPage();
  watch(stranger);
  const refused = await stranger.goto(`${origin}/dashboard/signup`);
  assert.equal(refused?.status(), 403);
  assert.match((await stranger.textContent('main'))!, /setup link/i);
  consoleErrors.length = 0; // the 403 document itself is expected

  const setup = await chrome.newPage();
  watch(setup);
  await setup.goto(ownerSetupUrl(ctx.config, origin));
  await setup.fill('input[name=email]', OWNER.email);
  await setup.fill('input[name=password]', OWNER.password);
  await setup.click('button[type=submit]');
  await setup.waitForURL(`${origin}/dashboard`);
  await setup.close();

  // Eleven wrong passwords for the owner's email from four other addresses.
  for (let i = 0; i < 11; i++) {
    const attacker = formClient(ctx, { 'x-forwarded-for': `203.0.113.${i % 4}` });
    await attacker.get('/dashboard/login');
    const r = await attacker.post('/dashboard/login', { email: OWNER.email, password: `wrong password ${i}` });
    assert.equal(r.res.status, 401);
  }

  // The owner, from their own address, in a fresh browser context.
  const context = await chrome.newContext();
  const page = await context.newPage();
  watch(page);
  await page.goto(`${origin}/dashboard/login`);
  assert.equal(await page.getAttribute('input[name=email]', 'maxlength'), '254');
  await page.fill('input[name=email]', OWNER.email);
  await page.fill('input[name=password]', OWNER.password);
  await page.click('button[type=submit]');
  await page.waitForURL(`${origin}/dashboard`);
  assert.match((await page.textContent('main'))!, /Projects/);
  assert.deepEqual(consoleErrors, []);
});
