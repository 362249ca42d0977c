import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';

const skip = browserSkip('the templates browser test');

test('a real browser: create a template, edit the draft, preview it sandboxed, publish, and follow an email to its version; no console errors', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  const origin = await serveApp(ctx.app);

  const browser = await launchBrowser();
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const consoleErrors: string[] = [];
  watchPage(page, consoleErrors);

  await signUpOwner(page, origin);
  await page.fill('input[name=name]', 'Templated');
  await page.click('button:has-text("Create project")');
  await page.waitForURL(/\/keys$/);
  await page.fill('input[name=name]', 'sender');
  await page.click('button:has-text("Create key")');
  const key = (await page.textContent('#new-key'))!;
  await page.click('text=Back to API keys');

  // Create, then edit the draft.
  await page.click('nav >> text=Templates');
  await page.waitForURL(/\/templates$/);
  await page.fill('input[name=name]', 'Welcome');
  await page.fill('input[name=alias]', 'welcome');
  await page.fill('textarea[name=html]', '<h1>Hello</h1>');
  await page.click('button:has-text("Create template")');
  await page.waitForURL(/\/templates\/tmpl_\w{26}$/);
  assert.equal(await page.textContent('#template-status'), 'draft');
  await page.fill('input[name=subject]', 'Hi {{name}}');
  await page.fill('input[name=from]', 'Acme <hello@acme.example>');
  await page.fill('textarea[name=variables]', '[{"key":"name","type":"string"},{"key":"count","type":"number","fallback_value":1}]');
  await page.fill('textarea[name=html]', '<h1>Hello {{name}}</h1><p>{{count}} new</p>');
  await page.fill('textarea[name=text]', 'Hello {{name}}');
  await page.click('button:has-text("Save draft")');
  await page.waitForSelector('input[name="sample.name"]');

  // Preview with sample values, in the sandboxed frame the inbox uses.
  const title = await page.title();
  await page.fill('input[name="sample.name"]', '<b>Ann</b>');
  await page.click('button:has-text("Preview")');
  await page.waitForURL(/sample\.name=/);
  const h1 = page.frameLocator('iframe').locator('h1');
  assert.equal(await h1.textContent({ timeout: 10_000 }), 'Hello <b>Ann</b>', 'the value is escaped in the HTML');
  assert.equal(await page.frameLocator('iframe').locator('p').textContent(), '1 new', 'the fallback fills count');
  assert.equal(await page.textContent('#preview-subject'), 'Hi <b>Ann</b>');
  assert.equal(await page.textContent('#preview-text'), 'Hello <b>Ann</b>');
  assert.ok(page.frames().some((f) => f.url().includes('/preview?sample.name=')), 'the HTML is its own frame');
  assert.equal(await page.title(), title);
  // The same frame as the inbox's: no permissions at all, so a script in a draft never runs.
  assert.equal(await page.getAttribute('iframe', 'sandbox'), '');
  const framed = await fetch(page.frames().find((f) => f.url().includes('/preview'))!.url(), { headers: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ') } });
  assert.match(framed.headers.get('content-security-policy')!, /default-src 'none'.*sandbox/);

  // Publish, then send with it through the API and follow the email to the template.
  await page.click('button:has-text("Publish version 1")');
  await page.waitForSelector('#published-note');
  assert.equal(await page.textContent('#template-status'), 'published');
  assert.equal(await page.locator('#versions tbody tr').count(), 1);
  const res = await fetch(`${origin}/v1/emails`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to: 'ann@example.net', template: { id: 'welcome', variables: { name: 'Ann' } } }),
  });
  assert.equal(res.status, 201);
  await page.click('nav >> text=Emails');
  await page.click('#emails >> text=Hi Ann');
  await page.waitForURL(/\/emails\/email_\w{26}$/);
  assert.match((await page.textContent('#email-fields'))!, /version 1/);
  await page.click('#template-link');
  await page.waitForURL(/\/templates\/tmpl_\w{26}$/);
  assert.equal(await page.locator('h1').first().textContent(), 'Welcome');

  assert.deepEqual(consoleErrors, [], 'no console errors on any page');
});
