import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTestContext } from '../helpers/app.ts';
import { browserSkip, serveApp, launchBrowser, watchPage, signUpOwner } from '../helpers/browser.ts';

const skip = browserSkip('the Received page browser test');

const MESSAGE = [
  'From: Ann Example <ann@example.net>', 'To: Support <support@acme.test>', 'Subject: Question about my order',
  'Message-ID: <q1@mail.example.net>', 'MIME-Version: 1.0', 'Content-Type: multipart/alternative; boundary="b"', '',
  '--b', 'Content-Type: text/plain; charset=utf-8', '', 'Where is my parcel?', '', 'On Mon, Acme wrote:', '> It has shipped.',
  '--b', 'Content-Type: text/html; charset=utf-8', '',
  `<script>document.title='pwned';window.parent.document.title='pwned'</script><h1>Where is my parcel?</h1>`,
  '--b--', '',
].join('\r\n');

test('a real browser: a message received locally shows on the Received page in the sandboxed preview; its script never runs', { skip, timeout: 90_000 }, async () => {
  const ctx = await createTestContext({ env: { NODE_ENV: 'development' } });
  const origin = await serveApp(ctx.app);
  const browser = await launchBrowser();
  const page = await browser.newPage();
  const errors: string[] = [];
  watchPage(page, errors);

  await signUpOwner(page, origin);
  await page.fill('input[name=name]', 'Inbound project');
  await page.click('button:has-text("Create project")');
  await page.waitForURL(/\/keys$/);
  await page.fill('input[name=name]', 'full key');
  await page.click('button:has-text("Create key")');
  const key = (await page.textContent('#new-key'))!;

  const res = await fetch(`${origin}/v1/sink/inbound`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'message/rfc822' }, body: MESSAGE });
  assert.equal(res.status, 201);
  const { id } = await res.json() as { id: string };

  await page.click('nav >> text=Received');
  await page.waitForURL(/\/received$/);
  assert.equal(await page.locator(`#row-${id}`).count(), 1);
  await page.click('text=Question about my order');
  await page.waitForURL(new RegExp(`/received/${id}$`));
  const title = await page.title();
  const h1 = page.frameLocator('iframe').locator('h1');
  assert.equal(await h1.textContent({ timeout: 10_000 }), 'Where is my parcel?', 'the HTML renders inside the frame');
  const frame = page.frames().find((f) => f.url().endsWith('/html'));
  assert.ok(frame, 'the received HTML is its own frame');
  assert.equal(await page.locator('iframe').getAttribute('sandbox'), '', 'sandboxed with no permissions');
  assert.notEqual(await frame.title(), 'pwned', 'the script inside the frame did not run');
  assert.equal(await page.title(), title, 'nor did it reach the dashboard');
  assert.equal(await page.textContent('#stripped'), 'Where is my parcel?', 'the reply without its quote');
  assert.equal(await page.locator('script').count(), 0);
  // The one error is the browser refusing the sender's script, which is the point.
  assert.deepEqual(errors.filter((e) => !e.startsWith('Blocked script execution')), []);
  assert.equal(errors.length, 1);
});
