import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { chromium } from 'playwright-core';
import { createTestContext } from '../helpers/app.ts';
import { ownerSetupUrl } from '../../dashboard/setup.ts';
import { browser as formClient, OWNER } from './client.ts';

const CHROMIUM = '/usr/bin/chromium';
const skip = existsSync(CHROMIUM) ? false : `no browser at ${CHROMIUM} (apt-get install chromium)`;
if (skip) console.log(`# skipping the sign-in browser test: ${skip}`);

test('a real browser, production: the setup link signs up the owner, and a flood of wrong passwords from elsewhere never locks them out', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { TRUST_PROXY: 'true' } });
  const server = serve({ fetch: ctx.app.fetch, port: 0, hostname: '127.0.0.1' });
  after(() => new Promise<void>((resolve) => {
    server.close(() => resolve());
    (server as unknown as { closeAllConnections(): void }).closeAllConnections();
  }));
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const chrome = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  after(() => chrome.close());
  const consoleErrors: string[] = [];
  const watch = (page: import('playwright-core').Page) => {
    page.setDefaultTimeout(15_000);
    page.on('console', (msg) => { if (msg.type() === 'error') consoleErrors.push(msg.text()); });
    page.on('pageerror', (err) => consoleErrors.push(err.message));
  };

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
