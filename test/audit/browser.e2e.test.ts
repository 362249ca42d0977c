import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';

const skip = browserSkip('the audit log browser test');

test('a real browser: changes made in the dashboard and with a key appear on the Audit page, filtered by project, actor and action', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  const origin = await serveApp(ctx.app);
  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors: string[] = [];
  watchPage(page, errors);

  await signUpOwner(page, origin);
  for (const name of ['Alpha', 'Beta']) {
    await page.goto(`${origin}/dashboard`);
    await page.fill('input[name=name]', name);
    await page.click('button:has-text("Create project")');
    await page.waitForURL(/\/keys$/);
  }
  await page.fill('input[name=name]', 'beta key');
  await page.click('button:has-text("Create key")');
  const key = (await page.textContent('#new-key'))!;
  // A change through the API, as the key.
  assert.equal((await fetch(`${origin}/v1/suppressions`, {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ email: 'ann@example.net' }),
  })).status, 201);

  await page.click('header >> text=Audit log');
  await page.waitForURL(/\/dashboard\/audit$/);
  const actions = async () => page.locator('#audit tbody tr td:nth-child(3)').allTextContents();
  assert.deepEqual(await actions(), ['suppression.added', 'api_key.created', 'project.created', 'project.created', 'member.signed_in', 'member.joined']);
  assert.match((await page.locator('#audit tbody tr').first().textContent())!, /api_key: beta key/);
  // Over a real socket the entry carries the client's address.
  assert.equal(await page.locator('#audit tbody tr').first().locator('td').nth(6).textContent(), '127.0.0.1');

  await page.selectOption('select[name=project]', { label: 'Alpha' });
  await page.click('button:has-text("Filter")');
  await page.waitForURL(/project=proj_/);
  assert.deepEqual(await actions(), ['project.created']);

  await page.selectOption('select[name=project]', '');
  await page.selectOption('select[name=actor]', { label: 'api_key: beta key' });
  await page.click('button:has-text("Filter")');
  await page.waitForURL(/actor=api_key/);
  assert.deepEqual(await actions(), ['suppression.added']);

  await page.selectOption('select[name=actor]', { label: 'member: owner@example.com' });
  await page.selectOption('select[name=action]', 'api_key.created');
  await page.click('button:has-text("Filter")');
  await page.waitForURL(/action=api_key.created/);
  assert.deepEqual(await actions(), ['api_key.created']);
  const html = await page.content();
  assert.ok(!html.includes(key) && !/sk_/.test(html.replace(/<[^>]*>/g, '')), 'no key on the page');

  await page.click('text=Show all');
  await page.waitForURL(/\/dashboard\/audit$/);
  assert.equal((await actions()).length, 6);
  assert.deepEqual(errors, []);
});
